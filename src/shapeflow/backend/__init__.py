"""Backends: each device's kernel table. `cpu/` is NumPy, MKL and the compiled C kernels;
`reference/` the portable kernels any array namespace runs; `null` the meta device's table."""
