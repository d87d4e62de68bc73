"""`torch.backends.cuda`: `matmul.allow_tf32` and kin, settable, with no effect here."""

from __future__ import annotations


class _Matmul:
    """`torch.backends.cuda.matmul`'s flags (class attributes are the defaults)."""

    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    def __repr__(self) -> str:
        return "<shapeflow.backends.cuda.matmul>"


matmul = _Matmul()


def is_built() -> bool:
    """False: shapeflow is not built with CUDA."""
    return False
