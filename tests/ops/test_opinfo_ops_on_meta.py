"""The ops the OpInfo work added run on the meta device: the same output shapes and dtypes as
on cpu, with no data (issue 35: "every new op is on meta")."""

from __future__ import annotations

import pytest

import shapeflow as sf

F = sf.nn.functional


def _ints(device, *shape, high=3):
    return sf.randint(0, high, shape).to(device) if device == "cpu" else \
        sf.empty(*shape, dtype=sf.int64, device="meta")


def _floats(device, *shape):
    return sf.randn(*shape) if device == "cpu" else sf.empty(*shape, device="meta")


CASES = {
    "max_pool3d": lambda d: F.max_pool3d(_floats(d, 2, 3, 4, 4, 4), 2, return_indices=True),
    "avg_pool3d": lambda d: F.avg_pool3d(_floats(d, 2, 3, 4, 4, 4), 2),
    "adaptive_avg_pool3d": lambda d: F.adaptive_avg_pool3d(_floats(d, 2, 3, 4, 4, 4), 2),
    "adaptive_max_pool1d": lambda d: F.adaptive_max_pool1d(_floats(d, 2, 3, 8), 3),
    "conv_transpose3d": lambda d: F.conv_transpose3d(_floats(d, 1, 2, 3, 3, 3),
                                                     _floats(d, 2, 4, 2, 2, 2)),
    "max_unpool2d": lambda d: F.max_unpool2d(_floats(d, 1, 2, 2, 2), _ints(d, 1, 2, 2, 2), 2),
    "grid_sample": lambda d: F.grid_sample(_floats(d, 1, 2, 4, 4), _floats(d, 1, 3, 3, 2),
                                           align_corners=False),
    "embedding_bag": lambda d: F.embedding_bag(_ints(d, 2, 3), _floats(d, 10, 4)),
    "ctc_loss": lambda d: F.ctc_loss(_floats(d, 5, 2, 4).log_softmax(2),
                                     _ints(d, 2, 3, high=3) + 1, [5, 5], [3, 2]),
    "multi_margin_loss": lambda d: F.multi_margin_loss(_floats(d, 3, 4), _ints(d, 3)),
    "triplet_margin_loss": lambda d: F.triplet_margin_loss(*(_floats(d, 3, 4) for _ in "abc")),
    "lu_factor": lambda d: sf.linalg.lu_factor(_floats(d, 3, 3)),
    "matrix_exp": lambda d: sf.linalg.matrix_exp(_floats(d, 3, 3).double()),
    "lstsq": lambda d: sf.linalg.lstsq(_floats(d, 4, 3), _floats(d, 4, 2)),
    "cond": lambda d: sf.linalg.cond(_floats(d, 3, 3)),
    "triangular_solve": lambda d: sf.triangular_solve(_floats(d, 3, 2), _floats(d, 3, 3)),
    "fft": lambda d: sf.fft.fft(_floats(d, 8)),
    "rfft2": lambda d: sf.fft.rfft2(_floats(d, 4, 8)),
    "irfft": lambda d: sf.fft.irfft(sf.fft.rfft(_floats(d, 8))),
    "polar": lambda d: sf.polar(_floats(d, 3), _floats(d, 3)),
    "view_as_complex": lambda d: sf.view_as_complex(_floats(d, 3, 2)),
    "native_layer_norm": lambda d: sf.native_layer_norm(_floats(d, 2, 4), [4], _floats(d, 4),
                                                        _floats(d, 4), 1e-5),
    "stft": lambda d: sf.stft(_floats(d, 2, 200), n_fft=32, hop_length=8,
                              window=sf.hann_window(32).to(d), return_complex=True),
    "istft": lambda d: sf.istft(sf.stft(_floats(d, 200), n_fft=32, hop_length=8,
                                        window=sf.hann_window(32).to(d), return_complex=True),
                                n_fft=32, hop_length=8, window=sf.hann_window(32).to(d)),
    "eig": lambda d: sf.linalg.eig(_floats(d, 3, 3)),
    "eigvals": lambda d: sf.linalg.eigvals(_floats(d, 2, 3, 3)),
    "householder_product": lambda d: sf.linalg.householder_product(_floats(d, 4, 3),
                                                                    _floats(d, 3)),
    "geqrf": lambda d: sf.geqrf(_floats(d, 4, 3)),
    "ldl_factor": lambda d: sf.linalg.ldl_factor(_floats(d, 3, 3)),
    "fractional_max_pool2d": lambda d: F.fractional_max_pool2d(
        _floats(d, 1, 2, 8, 8), 2, output_size=4, return_indices=True),
    "conv2d_int64": lambda d: F.conv2d(_ints(d, 1, 2, 5, 5), _ints(d, 3, 2, 3, 3)),
    "multi_head_attention_forward": lambda d: F.multi_head_attention_forward(
        _floats(d, 3, 2, 8), _floats(d, 3, 2, 8), _floats(d, 3, 2, 8), 8, 2,
        _floats(d, 24, 8), _floats(d, 24), None, None, False, 0.0, _floats(d, 8, 8),
        _floats(d, 8), training=False),
}


def _described(out) -> list:
    if isinstance(out, sf.Tensor):
        return [(tuple(out.shape), out.dtype)]
    if isinstance(out, (tuple, list)):
        return [d for x in out for d in _described(x)]
    return []


@pytest.mark.parametrize("name", list(CASES))
def test_meta_gives_cpus_shapes_and_dtypes_without_data(name):
    meta_out = CASES[name]("meta")
    assert _described(meta_out) == _described(CASES[name]("cpu"))
    assert all(t._data is None for t in _flat(meta_out))


def _flat(out) -> list:
    if isinstance(out, sf.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for x in out for t in _flat(x)]
    return []
