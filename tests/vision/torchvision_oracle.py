"""torchvision as a test oracle on the CPU build of torch.

The torchvision wheel on PyPI is built against CUDA torch: its compiled ops (`_C.so`) cannot
load next to the CPU torch the tests pin, and its import then fails while registering fake
kernels for `torchvision::nms` and `qnms`, ops that were never defined. Defining their schemas
first lets the pure-Python parts (models, transforms, datasets, utils) import and run; the
detection ops themselves stay unavailable, and no test uses them.
"""

from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")

_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def import_torchvision():
    """The torchvision module, importable on the CPU torch (skips the test if it is absent)."""
    try:
        import torchvision
        return torchvision
    except RuntimeError:  # the nms registration failed: define the schemas, then retry
        pass
    except ImportError:
        pytest.skip("torchvision is not installed (make test installs it)")
    import sys

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        with contextlib.suppress(RuntimeError):  # defined by an earlier call in this process
            library.define(schema)
    import_torchvision.library = library  # a Library must stay alive to keep its definitions
    import torchvision
    return torchvision
