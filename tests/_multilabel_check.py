"""The data of scikit-learn's check_classifiers_multilabel_output_format_predict_proba.

Estimators whose predict_proba gives exact 0 and 1 waive that check (it demands the open
interval); their own tests repeat its data and its shape and dtype assertions with this.
"""

from sklearn.datasets import make_multilabel_classification
from sklearn.preprocessing import scale


def multilabel_check_data():
    """``(X_train, Y_train, X_test)``: the check's 100 rows, its last 25 held out."""
    X, Y = make_multilabel_classification(
        n_samples=100, n_features=2, n_classes=5, n_labels=3, length=50, allow_unlabeled=True,
        random_state=0,
    )
    X = scale(X)
    return X[:-25], Y[:-25], X[-25:]
