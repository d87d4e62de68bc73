"""The cpu table's BLAS sums under their old names: sum_over, row_sums, col_sums, row_means.

They live in backend/cpu/blas_sum.py and run as the cpu kernel table's `sum`, `row_sums`,
`col_sums` and `row_means` kernels (counted there). This module keeps the names for code
that holds NumPy arrays and has not moved to `x.device.kernels`; it reaches them through
the cpu device, as it imports no backend.
"""

from __future__ import annotations

from ..device import cpu

_table = cpu.kernels
_MAX_LEN = _table.blas_sums._MAX_LEN  # dtype -> the longest sum BLAS runs (else pairwise)
sum_over = _table.blas_sums.sum_over  # None where BLAS does not take the sum
row_sums = _table.row_sums
col_sums = _table.col_sums
row_means = _table.row_means
