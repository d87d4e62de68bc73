"""What runs the cpu device's kernels: NumPy, with MKL's gemm and compiled kernels when present."""
