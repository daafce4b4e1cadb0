"""Class labels (a 1-D y) in the boosting classifier: binary and one-vs-rest multi-class.

References: K binary models fitted on ``y == class_k`` (one-vs-rest by hand),
NumPy's normalisation of the sigmoids, and scikit-learn's
HistGradientBoostingClassifier for accuracy.
"""

import numpy as np
import pytest
import scipy.special
from sklearn.datasets import make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.exceptions import DataConversionWarning

from gpurpo.ensemble import GradientBoostingClassifier

NAMES = np.array(["ant", "bee", "cat", "dog"])


def _classes(n=600, seed=0):
    X, y = make_classification(n_samples=n, n_features=12, n_informative=6, n_classes=4,
                               n_clusters_per_class=1, random_state=seed)
    return X, y


def test_multiclass_scores_are_the_one_vs_rest_binary_models(monkeypatch):
    # single_target grows iteration m's tree on label m mod K alone: column k of 4 x 8
    # iterations is the 8-iteration binary model of class k. Every tree gets the same
    # root seed (its nodes' visiting orders, which break ties between equal gains), so
    # that both models grow the same trees from the same targets.
    import gpurpo.ensemble.boosting.iteration_draws as iteration_draws

    monkeypatch.setattr(iteration_draws, "draw_root_seeds",
                        lambda rng, n_trees: np.full(n_trees, 12345, dtype=np.uint64))
    X, y = _classes(300)
    params = dict(strategy="single_target", n_estimators=8, max_leaf_nodes=5,
                  learning_rate=0.2, random_state=0)
    model = GradientBoostingClassifier(**{**params, "n_estimators": 32}).fit(X, NAMES[y])
    np.testing.assert_array_equal(model.classes_, NAMES)
    F = model.decision_function(X)
    assert F.shape == (300, 4)
    for k in range(4):
        binary = GradientBoostingClassifier(**params).fit(X, y == k)
        np.testing.assert_allclose(F[:, k], binary.decision_function(X), rtol=1e-9, atol=1e-9)


def test_multiclass_probabilities_and_predictions():
    X, y = _classes()
    model = GradientBoostingClassifier(n_estimators=30, max_leaf_nodes=8,
                                       random_state=0).fit(X, NAMES[y])
    F = model.decision_function(X)
    sig = scipy.special.expit(F)
    P = model.predict_proba(X)
    np.testing.assert_allclose(P, sig / sig.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(X), NAMES[np.argmax(F, axis=1)])
    staged = list(model.staged_predict(X))
    np.testing.assert_array_equal(staged[-1], model.predict(X))
    np.testing.assert_allclose(list(model.staged_predict_proba(X))[-1], P)
    # integer labels give the same model as their names
    as_int = GradientBoostingClassifier(n_estimators=30, max_leaf_nodes=8,
                                        random_state=0).fit(X, y)
    np.testing.assert_array_equal(as_int.classes_, [0, 1, 2, 3])
    np.testing.assert_allclose(as_int.predict_proba(X), P)
    np.testing.assert_array_equal(NAMES[as_int.predict(X)], model.predict(X))


def test_multiclass_accuracy_is_close_to_scikit_learn():
    X, y = _classes(1500, seed=1)
    X_train, X_test, y_train, y_test = X[:1000], X[1000:], y[:1000], y[1000:]
    ours = GradientBoostingClassifier(strategy="multi_output", projection=None,
                                      n_estimators=100, max_leaf_nodes=31,
                                      random_state=0).fit(X_train, y_train)
    theirs = HistGradientBoostingClassifier(max_iter=100, max_leaf_nodes=31,
                                            early_stopping=False,
                                            random_state=0).fit(X_train, y_train)
    ours_acc = float((ours.predict(X_test) == y_test).mean())
    theirs_acc = float((theirs.predict(X_test) == y_test).mean())
    majority = float(np.bincount(y_test).max() / y_test.size)
    assert ours_acc > majority + 0.3
    assert ours_acc >= theirs_acc - 0.04


def test_two_class_labels_of_any_kind():
    X, y = _classes(300)
    labels = np.where(y >= 2, "yes", "no")
    model = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, labels)
    np.testing.assert_array_equal(model.classes_, ["no", "yes"])
    F = model.decision_function(X)
    assert F.shape == (300,)
    np.testing.assert_array_equal(model.predict(X), np.where(F > 0, "yes", "no"))
    P = model.predict_proba(X)
    np.testing.assert_allclose(P[:, 1], scipy.special.expit(F))
    # the same model as the 0/1 indicator of the second class
    indicator = GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y >= 2)
    np.testing.assert_allclose(indicator.decision_function(X), F)


def test_class_label_errors_and_warnings():
    X, y = _classes(200)
    labels = NAMES[y]
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        GradientBoostingClassifier(n_estimators=2).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=r"eval_set\[1\] holds labels not seen in fit: \['eel'\]"):
        GradientBoostingClassifier(n_estimators=2).fit(
            X[:150], labels[:150], eval_set=(X[150:], np.where(y[150:] == 0, "eel", "bee")))
    with pytest.raises(ValueError, match="eval_set.1. must be 1-D class labels"):
        GradientBoostingClassifier(n_estimators=2).fit(
            X[:150], labels[:150], eval_set=(X[150:], np.eye(4)[y[150:]]))
    warm = GradientBoostingClassifier(n_estimators=2, warm_start=True).fit(X, labels)
    with pytest.raises(ValueError, match="warm_start: y held classes"):
        warm.set_params(n_estimators=4).fit(X, np.where(y == 0, "eel", labels))
    with pytest.raises(ValueError, match="warm_start: y held classes"):
        warm.fit(X, np.eye(4)[y])
    assert warm.fit(X, labels).n_estimators_ == 4
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(
            X, labels[:, None])
    flat = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, labels)
    np.testing.assert_array_equal(column.predict(X), flat.predict(X))
    with pytest.raises(ValueError, match="y contains NaN"):
        GradientBoostingClassifier(n_estimators=2).fit(X, np.where(y == 0, np.nan, y))


def test_models_pickled_before_class_labels_still_predict():
    # a model pickled with the older target record keeps whether y was 1-D (_one_d) and the
    # indicator values as classes_, but no target kind
    import pickle

    X, y = _classes(200)
    binary = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y >= 2)
    indicators = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(
        X, np.eye(4, dtype=int)[y])
    for model in (binary, indicators):
        want_labels, want_proba = model.predict(X), model.predict_proba(X)
        old = pickle.loads(pickle.dumps(model))
        del old.__dict__["_target_kind"]
        np.testing.assert_array_equal(old.predict(X), want_labels)
        np.testing.assert_array_equal(old.predict_proba(X), want_proba)
