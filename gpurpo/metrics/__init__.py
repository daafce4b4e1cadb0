"""Metrics for multi-label classification and multi-output regression.

Every metric accepts dense arrays or sparse (CSR) matrices for both
arguments, on NumPy/SciPy or CuPy/cupyx (computed where the data lives, with
the array module of :func:`gpurpo.backend.resolve_backend`), and works over
blocks of rows so that the temporaries stay within a memory budget whatever
the number of labels d: ``chunk_size`` rows at a time, by default as many
rows as fit in about 128 MiB of temporaries. Results are Python floats.

========================================  =====================================
:func:`label_ranking_average_precision`   Joly et al. (2014) eq. 6 (LRAP)
:func:`macro_r2`                          Joly et al. eq. 26 (mean R^2 over outputs)
:func:`micro_auprc`                       area under the micro-averaged
                                          precision-recall curve
:func:`precision_at_k`                    mean precision of the top k labels
:func:`rmse`                              Bi & Kwok (2013) eq. 6
:func:`hamming_loss`                      fraction of wrong label entries
========================================  =====================================

References
----------
A. Joly, P. Geurts, L. Wehenkel. Random forests with random projections of
the output space for high dimensional multi-label classification. ECML PKDD
2014.

W. Bi, J. T. Kwok. Efficient multi-label classification with many labels.
ICML 2013.
"""

from gpurpo.metrics._curves import micro_auprc
from gpurpo.metrics._elementwise import hamming_loss, macro_r2, rmse
from gpurpo.metrics._ranking import label_ranking_average_precision, precision_at_k

__all__ = [
    "label_ranking_average_precision",
    "macro_r2",
    "micro_auprc",
    "precision_at_k",
    "rmse",
    "hamming_loss",
]
