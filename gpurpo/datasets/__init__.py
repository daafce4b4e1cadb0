"""Data for many-output learning: synthetic generators and file loaders.

Generators
    :func:`make_multilabel` (structured multi-label data, dense or CSR labels,
    up to millions of labels, continuous inputs or binary word presence
    features as text data sets have), :func:`make_delicious_like`,
    :func:`make_mediamill_like` (benchmark shapes) and
    :func:`make_friedman1_multioutput` (the friedman1-chain, -group and -ind
    regression problems of Joly et al.'s multi-output gradient boosting);
    :func:`make_correlated_counts`, :func:`make_duplicated_features` and
    :func:`make_few_valued_features` (tie-heavy multi-target regression).
Loaders
    :func:`load_arff` (MULAN and MEKA ARFF files, dense or sparse) and
    :func:`load_xmc` (the Extreme Classification Repository text format),
    both returning a :class:`MultiLabelDataset` ``(X, Y, feature_names,
    label_names)`` with ``Y`` in CSR format.
"""

from gpurpo.datasets._arff import load_arff
from gpurpo.datasets._base import MultiLabelDataset
from gpurpo.datasets._friedman import make_friedman1_multioutput
from gpurpo.datasets._multilabel import (
    make_delicious_like,
    make_mediamill_like,
    make_multilabel,
)
from gpurpo.datasets._tie_heavy import (
    make_correlated_counts,
    make_duplicated_features,
    make_few_valued_features,
)
from gpurpo.datasets._xmc import load_xmc

__all__ = [
    "MultiLabelDataset",
    "load_arff",
    "load_xmc",
    "make_correlated_counts",
    "make_delicious_like",
    "make_duplicated_features",
    "make_few_valued_features",
    "make_friedman1_multioutput",
    "make_mediamill_like",
    "make_multilabel",
]
