"""Quantile binning of the inputs into small integer codes.

Histogram-based split finding works on features discretised into at most
``max_bins`` ordered bins per feature (uint8 codes), plus one bin reserved
for missing values (NaN):

* bin edges are fitted per feature on the host, on a random subsample of at
  most ``subsample`` rows when n is large. A feature with at most
  ``max_bins`` distinct values gets one bin per value, with edges at the
  midpoints between consecutive distinct values; otherwise the edges are
  midpoints between consecutive distinct values taken at the
  ``j / max_bins`` quantiles (a value and all its ties stay in one bin, so a
  heavily repeated value such as the zero of a sparse feature is one bin);
* code of a value ``x`` of feature ``f``: ``#{edges_f < x}``, so that
  ``code <= b`` if and only if ``x <= edges_f[b]`` (compared in float64). A
  split "code <= b" learned on binned data is therefore the split
  "x <= edges_f[b]" on raw values: trees store real thresholds and predict
  from raw ``X``;
* NaN gets the code ``missing_bin = n_bins - 1`` where ``n_bins`` is one
  more than the largest number of value bins over all features: THE LAST
  BIN is the missing-value bin (so a data set of binary features has
  ``n_bins = 3``, not 256, and histograms are small);
* codes are stored FEATURE-MAJOR: a C-contiguous uint8 array of shape
  ``(n_features, n_samples)``, so the codes of one feature for consecutive
  samples are contiguous (streaming reads on the CPU, coalesced on a GPU).

:meth:`BinMapper.fit_transform` gives the codes of the data the edges are fitted
on; on the CPU it reads them from the float32 values of each block of
features that the edge fit sorts a copy of (the same codes as
:meth:`BinMapper.transform`; see :func:`_bin_by_blocks`).

Dense ``X``, and sparse (cupyx) ``X`` on a GPU, are binned densely; the binned
matrix must fit in ``max_binned_bytes`` (default 4 GiB), otherwise a
``ValueError`` says so. On the CPU a sparse (SciPy) ``X`` keeps the codes of its
stored entries only, and so does a dense ``X`` whose codes turn out to be
mostly their feature's code of 0.0 (``BinnedMatrix.dense_codes``).

The package holds the bin mapper (:mod:`._mapper`), the edge strategies that the
mapper picks by input (columns of 0.0 and 1.0 :mod:`._binary_columns`, sorted rows
:mod:`._sorted_edges`, bucket selection
:mod:`._bucket_edges`, weighted samples :mod:`._weighted_edges`, sparse columns
:mod:`._sparse`), the value-to-code tables (:mod:`._code_tables`) and the edge
lookups that the split and prediction kernels share with the coding
(:mod:`._edge_lookup`).
"""

from gpurpo.tree.binning._mapper import (
    DEFAULT_MAX_BINNED_BYTES,
    MAX_BINS,
    BinMapper,
    BinnedMatrix,
    check_max_bins,
)
from gpurpo.tree.binning._sparse import canonical_csc, canonical_csr
from gpurpo.tree.binning._stack import stack_binned

__all__ = [
    "BinMapper",
    "BinnedMatrix",
    "MAX_BINS",
    "DEFAULT_MAX_BINNED_BYTES",
    "canonical_csc",
    "canonical_csr",
    "check_max_bins",
    "stack_binned",
]
