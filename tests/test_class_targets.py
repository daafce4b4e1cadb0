"""Classifier targets: one encoding for the trees, forests, label-space models and boosting."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import DataConversionWarning
from sklearn.preprocessing import LabelBinarizer, LabelEncoder

from gpurpo._class_targets import class_indices, encode_class_targets, labels_from_scores
from gpurpo.backend import NUMPY
from gpurpo.ensemble import GradientBoostingClassifier, RandomForestClassifier
from gpurpo.label_space import LabelSpaceClassifier
from gpurpo.tree import DecisionTreeClassifier

LABELS = [
    np.array([3, 1, 2, 3, 1, 7]),
    np.array(["b", "a", "c", "a", "b", "b"]),
    np.array([True, False, True, True, False, False]),
    np.array([-1.0, 2.0, -1.0, 2.0, 2.0, -1.0]),
]


@pytest.mark.parametrize("y", LABELS, ids=lambda y: y.dtype.kind)
@pytest.mark.parametrize("sparse", [False, True])
def test_one_hot_columns_equal_sklearns_label_encoding(y, sparse):
    targets = encode_class_targets(y, NUMPY, regressor="R", sparse_one_hot=sparse)
    encoder = LabelEncoder().fit(y)
    np.testing.assert_array_equal(targets.classes, encoder.classes_)
    np.testing.assert_array_equal(targets.encoded, encoder.transform(y))
    dense = targets.Y.toarray() if sparse else targets.Y
    assert sp.issparse(targets.Y) == sparse
    want = np.eye(len(encoder.classes_))[encoder.transform(y)]
    np.testing.assert_array_equal(dense, want)
    assert not targets.multilabel


def test_two_classes_give_two_columns_where_label_binarizer_gives_one():
    y = np.array(["no", "yes", "yes", "no"])
    targets = encode_class_targets(y, NUMPY, regressor="R")
    binarized = LabelBinarizer().fit_transform(y)[:, 0]
    np.testing.assert_array_equal(targets.Y[:, 1], binarized)
    np.testing.assert_array_equal(targets.Y[:, 0], 1 - binarized)


def test_multilabel_matrix_passes_through_checked():
    Y = np.array([[0, 1, 1], [1, 0, 0]])
    for given in (Y, sp.csr_matrix(Y)):
        targets = encode_class_targets(given, NUMPY, regressor="R", dtype=np.float64)
        assert targets.multilabel and targets.encoded is None
        got = targets.Y.toarray() if sp.issparse(targets.Y) else targets.Y
        np.testing.assert_array_equal(got, Y)
        assert got.dtype == np.float64
    with pytest.raises(ValueError, match=r"multi-label y must contain only 0 and 1 .* use R for"):
        encode_class_targets(Y * 2, NUMPY, regressor="R")


@pytest.mark.parametrize(
    "y, match",
    [
        (np.array([0.1, 0.25, 0.3]),
         r"Unknown label type: continuous values in y; a classifier needs class labels \(use R for"),
        (np.array([0.0, np.nan, 1.0]), "y contains NaN or infinity"),
        (np.array([1 + 1j, 2 + 0j]), "Complex data not supported: y has dtype complex128"),
        (np.zeros((2, 2, 2)), r"y must be 1-D class labels or a 2-D label-indicator matrix, got shape \(2, 2, 2\)"),
    ],
)
def test_bad_targets_are_named(y, match):
    with pytest.raises(ValueError, match=match):
        encode_class_targets(y, NUMPY, regressor="R")


def test_too_few_classes_is_refused_only_where_asked():
    y = np.array([4, 4, 4])
    assert encode_class_targets(y, NUMPY, regressor="R").classes.tolist() == [4]
    with pytest.raises(ValueError, match=r"y holds one class \(4\); a classifier needs samples of at least 2 classes"):
        encode_class_targets(y, NUMPY, regressor="R", min_classes=2)


def test_column_vector_is_ravelled_with_a_warning():
    y = np.array([[1], [0], [1]])
    with pytest.warns(DataConversionWarning, match="A column-vector y was passed"):
        targets = encode_class_targets(y, NUMPY, regressor="R")
    np.testing.assert_array_equal(targets.encoded, [1, 0, 1])


def test_class_indices_refuse_unseen_labels():
    classes = np.array(["a", "b", "c"])
    np.testing.assert_array_equal(class_indices(np.array(["c", "a"]), classes, "y"), [2, 0])
    with pytest.raises(ValueError, match=r"y holds labels not seen in fit: \['d'\]"):
        class_indices(np.array(["a", "d"]), classes, "y")


def test_labels_from_scores_take_the_first_maximum():
    scores = np.array([[0.2, 0.5, 0.5], [0.9, 0.0, 0.1]])
    np.testing.assert_array_equal(labels_from_scores(scores, np.array([5, 6, 7]), NUMPY), [6, 5])
    np.testing.assert_array_equal(labels_from_scores(scores, np.array(["x", "y", "z"]), NUMPY), ["y", "x"])


def test_every_classifier_finds_the_same_classes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.array(["cat", "dog", "eel"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)]
    for est in (DecisionTreeClassifier(random_state=0), RandomForestClassifier(n_estimators=3, random_state=0),
                LabelSpaceClassifier(random_state=0), GradientBoostingClassifier(n_estimators=3, random_state=0)):
        est.fit(X, y)
        np.testing.assert_array_equal(est.classes_, ["cat", "dog", "eel"])
        assert set(est.predict(X)) <= {"cat", "dog", "eel"}
