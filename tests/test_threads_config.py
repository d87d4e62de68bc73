"""sf.set_num_threads / get_num_threads (PyTorch's intra-op thread count): a round trip that
the BLAS libraries honour, small products on the calling thread alone."""

import os
import subprocess
import sys

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import gemm, threads

torch = pytest.importorskip("torch")


@pytest.fixture
def restore_threads():
    before = sf.get_num_threads()
    yield
    sf.set_num_threads(before)


@pytest.mark.parametrize("omp", [None, "1"])
def test_the_default_is_pytorchs(omp):
    # a fresh process: both read OMP_NUM_THREADS once, and modules imported by other tests
    # (the benchmarks) set it in this one
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    code = ("import shapeflow as sf, torch\n"
            "print(sf.get_num_threads(), torch.get_num_threads(), sf.get_num_interop_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True).stdout.split()
    ours, theirs, interop = map(int, out)
    assert ours == theirs and interop >= 1


def test_round_trip_and_the_blas_libraries_report_it(restore_threads):
    for n in (1, sf.get_num_threads()):  # OpenBLAS caps the count at the cores it found
        sf.set_num_threads(n)
        assert sf.get_num_threads() == n
        assert set(threads.blas_threads().values()) <= {n}
    sf.set_num_interop_threads(2)
    assert sf.get_num_interop_threads() == 2


@pytest.mark.parametrize("name", ["set_num_threads", "set_num_interop_threads"])
@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_bad_counts_raise_runtime_error_as_pytorchs(name, bad):
    with pytest.raises(RuntimeError):
        getattr(torch, name)(bad)
    with pytest.raises(RuntimeError) as e:
        getattr(sf, name)(bad)
    assert isinstance(e.value, sf.ShapeflowError) and name in str(e.value)


@pytest.mark.skipif(gemm.backend() != "mkl", reason="float products through NumPy")
def test_large_products_use_the_count_small_ones_one_thread(restore_threads):
    rng = np.random.default_rng(0)
    small = rng.standard_normal((64, 64)).astype(np.float32)  # 2^18 multiply-adds
    large = rng.standard_normal((128, 128)).astype(np.float32)  # 2^21
    sf.set_num_threads(3)
    for a, want in ((large, 3), (small, 1), (large, 3)):
        np.testing.assert_allclose(gemm.matmul(a, a), a.astype(np.float64) @ a, rtol=1e-4,
                                   atol=1e-4)
        assert threads.blas_threads()["mkl"] == want  # what MKL ran that product on


@pytest.mark.skipif(gemm.backend() != "mkl" or sf.get_num_threads() < 2,
                    reason="needs MKL and two cores")
def test_small_products_start_no_threads():
    code = (  # a fresh process: no thread team exists yet
        "import os, numpy as np, shapeflow as sf\n"
        "from shapeflow.backend.cpu import gemm\n"
        "a = np.ones((64, 128), np.float32); b = np.ones((128, 64), np.float32)\n"
        "gemm.matmul(a, b)\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "for _ in range(50):\n"
        "    gemm.matmul(a, b)\n"  # 2^19 multiply-adds each
        "print(before, len(os.listdir('/proc/self/task')))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",
                                                            "MKL_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.split()
    first = subprocess.run([sys.executable, "-c", code.replace("gemm.matmul(a, b)\nbefore",
                                                               "before")],
                           capture_output=True, text=True, env=env, timeout=120,
                           check=True).stdout.split()
    assert out[0] == out[1] and first[0] == first[1], (out, first)


_SPIN = (  # CPU seconds the process burns in the 0.2 s after a threaded product
    "import time, numpy as np, shapeflow as sf\n"
    "from shapeflow.backend.cpu import gemm\n"
    "a = np.ones((256, 256), np.float32)\n"
    "gemm.matmul(a, a)\n"
    "t0 = time.process_time(); time.sleep(0.2); print(time.process_time() - t0)\n")


@pytest.mark.skipif(gemm.backend() != "mkl" or sf.get_num_threads() < 2,
                    reason="needs MKL and two cores")
def test_the_blas_threads_sleep_after_a_product():
    """Spinning threads take the cores a loaded machine's main thread needs."""
    env = {k: v for k, v in os.environ.items() if k != "KMP_BLOCKTIME"}
    out = subprocess.run([sys.executable, "-c", _SPIN], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout
    assert float(out) < 0.01, out
