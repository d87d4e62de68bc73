"""Each compiled library's loader finds the C source it checks the build against.

A loader whose source path is wrong gets no digest and trusts any build (the rule for an
install without sources), so a stale library would load silently: every path must exist.
"""

from __future__ import annotations

import os

import pytest

from shapeflow.backend.cpu import (
    bf16gemm,
    conv_kernels,
    igemm,
    kernels,
    native,
    norm_act_kernels,
    rnn_cell_kernels,
)
from shapeflow.serve import paged_attention

SOURCES = {"kernels": kernels._SOURCE_FILE, "bf16gemm": bf16gemm._FILE,
           "qgemm": igemm._QGEMM_FILE, "conv_kernels": conv_kernels._FILE,
           "norm_act_kernels": norm_act_kernels._FILE, "rnn_cell_kernels": rnn_cell_kernels._FILE,
           "paged_attention": paged_attention._SOURCE_FILE}


@pytest.mark.parametrize("library", list(SOURCES))
def test_the_loader_reads_the_source_it_was_built_from(library):
    path = SOURCES[library]
    assert os.path.isfile(path), path
    files = native.library_files(path)
    assert files[0] == path and os.path.basename(files[-1]) == "isa.h"
    assert native.source_digest(path) is not None
