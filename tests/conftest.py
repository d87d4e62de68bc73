import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=40, deadline=None)
settings.load_profile("ci")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _backend_state_restored():
    """Each test leaves the backend as it found it: a test that sets SHAPEFLOW_KERNELS=0 or
    SHAPEFLOW_BLAS=numpy while a backend loads lazily would otherwise switch the compiled
    paths off for every later test in its worker (and change their float32 results)."""
    from shapeflow.backend.cpu import gemm, igemm, kernels

    saved = [(d, dict(d)) for d in (gemm._state, gemm._GEMM, gemm._HALF_GEMM, igemm._state,
                                     kernels._state)]
    yield
    for d, was in saved:
        if d != was:
            d.clear()
            d.update(was)
