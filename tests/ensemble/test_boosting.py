"""Multi-output gradient boosting (Joly, Wehenkel & Geurts 2019).

Independent references: scikit-learn's HistGradientBoostingRegressor on one
output, scikit-learn metrics (r2_score, label_ranking_average_precision_score),
``scipy.special.expit``, identities of the paper (equal steps on identical
outputs, near-zero steps on independent outputs, relabel_rpo with the
identity projection is gbmort, Fig. 1b/1c orderings), the monotone training
loss implied by an optimal step, repeated rows versus integer weights, and
the same model refitted with fewer iterations.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.metrics import label_ranking_average_precision_score, r2_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from gpurpo.datasets import make_friedman1_multioutput, make_multilabel
from gpurpo.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

STRATEGIES = ["multi_output", "rpo", "relabel_rpo", "single_target"]


def integer_regression(n, p, seed, d=1):
    """Integer features (fewer distinct values than bins, so binning is exact)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 40, size=(n, p)).astype(float)
    base = np.sin(X[:, 0] / 6.0) + 0.05 * X[:, 1] + (X[:, 2] > 20)
    Y = base[:, None] + 0.3 * rng.standard_normal((n, d))
    return X, Y


def multilabel(n, d, seed):
    """Dense 0/1 labels of the structured generator (split rows for train/test)."""
    X, Y = make_multilabel(
        n_samples=n, n_features=10, n_labels=d, label_cardinality=2.0, sparse_output=False,
        random_state=seed,
    )
    return np.asarray(X), np.asarray(Y.toarray() if sp.issparse(Y) else Y)


# --------------------------------------------------------------------------
# One output: every strategy is ordinary gradient boosting
# --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_single_output_matches_sklearn_hist_gradient_boosting(strategy):
    X, Y = integer_regression(300, 4, 0)
    Xt, _ = integer_regression(200, 4, 1)
    ref = HistGradientBoostingRegressor(
        max_iter=25, max_leaf_nodes=6, learning_rate=0.2, min_samples_leaf=1,
        early_stopping=False, l2_regularization=0.0,
    ).fit(X, Y[:, 0])
    ours = GradientBoostingRegressor(
        strategy=strategy, n_estimators=25, max_leaf_nodes=6, learning_rate=0.2, random_state=0
    ).fit(X, Y[:, 0])
    pred = ours.predict(Xt)
    assert pred.shape == (200,)
    np.testing.assert_allclose(pred, ref.predict(Xt), rtol=1e-7, atol=1e-7)
    # the l2 step of a tree labelled with leaf means is 1 (least squares), up to the
    # float32 rounding of the gradients the leaves average
    np.testing.assert_allclose(ours.steps_, 1.0, rtol=1e-6)


# --------------------------------------------------------------------------
# Paper identities on rho_m
# --------------------------------------------------------------------------


def test_rpo_steps_are_equal_on_identical_outputs():
    X, Y = integer_regression(200, 4, 2)
    Yd = np.repeat(Y, 6, axis=1)
    model = GradientBoostingRegressor(
        strategy="rpo", projection="gaussian", n_estimators=15, max_leaf_nodes=5, random_state=0
    ).fit(X, Yd)
    steps = model.steps_
    assert steps.shape == (15, 6)
    np.testing.assert_allclose(steps, steps[:, :1] * np.ones((1, 6)), rtol=1e-9)
    assert np.all(np.abs(steps) > 0)


def test_rpo_steps_vanish_on_independent_outputs_except_the_sampled_one():
    d = 6
    X, Y = make_friedman1_multioutput("ind", n_samples=600, n_outputs=d, random_state=0)
    model = GradientBoostingRegressor(
        strategy="rpo", projection="subsample", n_estimators=12, max_leaf_nodes=8,
        random_state=0,
    ).fit(X, Y)
    for rho, phi in zip(model.steps_, model.projections_):
        sampled = int(phi.indices[0])
        others = np.delete(np.abs(rho), sampled)
        # the tree fits sqrt(d) times the gradient of the sampled output: rho ~ 1/sqrt(d)
        assert 0.5 / np.sqrt(d) < rho[sampled] < 1.5 / np.sqrt(d)
        assert others.max() < 0.2 * rho[sampled]


def test_relabel_rpo_with_identity_projection_equals_multi_output():
    d = 5
    X, Y = make_friedman1_multioutput("chain", n_samples=250, n_outputs=d, random_state=3)
    Xt, _ = make_friedman1_multioutput("chain", n_samples=100, n_outputs=d, random_state=4)
    common = dict(n_estimators=15, max_leaf_nodes=6, learning_rate=0.3, random_state=0)
    gbmort = GradientBoostingRegressor(strategy="multi_output", **common).fit(X, Y)
    # subsampling all d outputs without replacement is a permutation of the outputs
    relabel = GradientBoostingRegressor(
        strategy="relabel_rpo", projection="subsample", n_components=d, **common
    ).fit(X, Y)
    for phi in relabel.projections_:
        np.testing.assert_allclose(np.sort(phi.toarray(), axis=1)[:, -1], 1.0)
        assert sorted(phi.indices.tolist()) == list(range(d))
    np.testing.assert_allclose(relabel.predict(Xt), gbmort.predict(Xt), rtol=1e-9, atol=1e-9)
    identity = GradientBoostingRegressor(
        strategy="relabel_rpo", projection=None, **common
    ).fit(X, Y)
    np.testing.assert_allclose(identity.predict(Xt), gbmort.predict(Xt), rtol=1e-12)


# --------------------------------------------------------------------------
# Optimal steps: the training loss never increases
# --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("loss", ["squared_error", "absolute_error"])
def test_training_loss_is_non_increasing_regression(strategy, loss):
    X, Y = make_friedman1_multioutput("chain", n_samples=150, n_outputs=4, random_state=5)
    model = GradientBoostingRegressor(
        strategy=strategy, loss=loss, n_estimators=12, max_leaf_nodes=4, learning_rate=0.5,
        random_state=0,
    ).fit(X, Y)
    F0 = np.broadcast_to(model.init_, Y.shape)
    def mean_loss(P):
        return np.mean(0.5 * (Y - P) ** 2) if loss == "squared_error" else np.mean(np.abs(Y - P))

    ref = np.asarray([mean_loss(F0)] + [mean_loss(P) for P in model.staged_predict(X)])
    assert np.all(np.diff(ref) <= 1e-10 * ref[:-1])
    np.testing.assert_allclose(model.train_loss_, ref[1:], rtol=1e-10)
    if loss == "absolute_error":
        # any point between the two middle values minimises the absolute error
        np.testing.assert_allclose(
            np.abs(Y - model.init_).sum(axis=0), np.abs(Y - np.median(Y, axis=0)).sum(axis=0)
        )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_training_log_loss_is_non_increasing(strategy):
    X, Y = multilabel(200, 8, 0)
    model = GradientBoostingClassifier(
        strategy=strategy, n_estimators=12, max_leaf_nodes=4, learning_rate=0.5, random_state=0
    ).fit(X, Y)
    S = 2 * Y - 1
    losses = [
        np.mean(np.logaddexp(0, -S * F)) for F in model.staged_decision_function(X)
    ]
    assert np.all(np.diff(losses) <= 1e-10)
    np.testing.assert_allclose(model.train_loss_, losses, rtol=1e-9)
    np.testing.assert_allclose(
        model.init_, scipy.special.logit(np.clip(Y.mean(axis=0), 1e-12, 1 - 1e-12))
    )


# --------------------------------------------------------------------------
# Output correlation structure (paper Fig. 1b and 1c)
# --------------------------------------------------------------------------


def _trees_to_reach(model, X, Y, threshold):
    for m, P in enumerate(model.staged_predict(X), start=1):
        if r2_score(Y, P) >= threshold:
            return m
    return np.inf


def test_group_outputs_need_far_fewer_trees_with_shared_models():
    d = 8
    X, Y = make_friedman1_multioutput("group", n_samples=400, n_outputs=d, random_state=0)
    Xv, Yv = make_friedman1_multioutput("group", n_samples=400, n_outputs=d, random_state=1)
    common = dict(max_leaf_nodes=4, learning_rate=0.1, random_state=0)
    needed = {}
    for strategy, budget in [("multi_output", 30), ("rpo", 30), ("single_target", 120)]:
        model = GradientBoostingRegressor(strategy=strategy, n_estimators=budget, **common)
        needed[strategy] = _trees_to_reach(model.fit(X, Y), Xv, Yv, 0.5)
    assert needed["rpo"] <= 20 and needed["multi_output"] <= 20
    assert needed["single_target"] >= 4 * max(needed["rpo"], needed["multi_output"])


def test_independent_outputs_favour_single_target():
    d = 4
    X, Y = make_friedman1_multioutput("ind", n_samples=300, n_outputs=d, random_state=0)
    Xv, Yv = make_friedman1_multioutput("ind", n_samples=400, n_outputs=d, random_state=1)
    common = dict(n_estimators=160, max_leaf_nodes=4, learning_rate=0.2, random_state=0)
    scores = {
        s: r2_score(Yv, GradientBoostingRegressor(strategy=s, **common).fit(X, Y).predict(Xv))
        for s in ("multi_output", "rpo", "single_target")
    }
    assert scores["single_target"] > scores["multi_output"]
    assert scores["single_target"] > scores["rpo"]


# --------------------------------------------------------------------------
# Stages, early stopping, warm start
# --------------------------------------------------------------------------


@pytest.mark.parametrize("leaf_step", ["global", "per_leaf"])
@pytest.mark.parametrize("strategy", ["rpo", "relabel_rpo"])
def test_staged_predict_equals_predict_of_shorter_model(strategy, leaf_step):
    X, Y = make_friedman1_multioutput("chain", n_samples=200, n_outputs=4, random_state=6)
    Xt, _ = make_friedman1_multioutput("chain", n_samples=50, n_outputs=4, random_state=7)
    params = dict(strategy=strategy, max_leaf_nodes=5, subsample=0.7, leaf_step=leaf_step,
                  random_state=3)
    full = GradientBoostingRegressor(n_estimators=12, **params).fit(X, Y)
    staged = list(full.staged_predict(Xt))
    assert len(staged) == 12
    np.testing.assert_allclose(staged[-1], full.predict(Xt), rtol=1e-10, atol=1e-10)
    for k in (1, 5):
        short = GradientBoostingRegressor(n_estimators=k, **params).fit(X, Y)
        np.testing.assert_allclose(staged[k - 1], short.predict(Xt), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("leaf_step", ["global", "per_leaf"])
def test_warm_start_continues_the_same_model(leaf_step):
    X, Y = multilabel(200, 6, 1)
    params = dict(strategy="relabel_rpo", max_leaf_nodes=5, subsample=0.8, leaf_step=leaf_step,
                  random_state=2)
    full = GradientBoostingClassifier(n_estimators=14, **params).fit(X, Y)
    warm = GradientBoostingClassifier(n_estimators=6, warm_start=True, **params).fit(X, Y)
    first = warm.decision_function(X)
    warm.set_params(n_estimators=14).fit(X, Y)
    assert warm.n_estimators_ == 14
    assert not np.allclose(first, warm.decision_function(X))
    np.testing.assert_allclose(warm.decision_function(X), full.decision_function(X), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(warm.train_loss_, full.train_loss_, rtol=1e-9)
    with pytest.raises(ValueError, match="n_estimators=5 must be larger or equal to the 14"):
        warm.set_params(n_estimators=5).fit(X, Y)


def test_early_stopping_stops_and_keeps_the_best_iteration():
    X, Y = make_friedman1_multioutput("group", n_samples=300, n_outputs=4, noise=3.0,
                                      random_state=8)
    model = GradientBoostingRegressor(
        strategy="multi_output", n_estimators=500, max_leaf_nodes=16, learning_rate=0.5,
        n_iter_no_change=5, validation_fraction=0.3, random_state=0,
    ).fit(X, Y)
    history = model.validation_loss_
    assert model.n_estimators_ < 100
    assert len(history) < 110
    # the kept model is the one of smallest validation loss, then 5 iterations without gain
    assert model.n_estimators_ == int(np.argmin(history))
    assert len(history) - 1 - model.n_estimators_ >= 5
    assert len(model.steps_) == model.n_estimators_ == len(model.train_loss_)


def test_early_stopping_on_eval_set():
    X, Y = make_friedman1_multioutput("chain", n_samples=300, n_outputs=3, noise=3.0,
                                      random_state=9)
    Xv, Yv = make_friedman1_multioutput("chain", n_samples=200, n_outputs=3, noise=3.0,
                                        random_state=10)
    model = GradientBoostingRegressor(
        n_estimators=400, max_leaf_nodes=16, learning_rate=0.5, n_iter_no_change=4,
        random_state=0,
    ).fit(X, Y, eval_set=(Xv, Yv))
    assert model.n_estimators_ < 400
    # validation losses recorded during fit are those of the kept predictions
    staged = [np.mean(0.5 * (Yv - P) ** 2) for P in model.staged_predict(Xv)]
    np.testing.assert_allclose(model.validation_loss_[1 : len(staged) + 1], staged, rtol=1e-9)


# --------------------------------------------------------------------------
# Multi-label classification
# --------------------------------------------------------------------------


def test_classifier_probabilities_and_label_encodings():
    X, Y = multilabel(500, 10, 2)
    X, Xt, Y, Yt = X[:300], X[300:], Y[:300], Y[300:]
    params = dict(strategy="rpo", n_estimators=40, max_leaf_nodes=8, random_state=0)
    zero_one = GradientBoostingClassifier(**params).fit(X, Y)
    signed = GradientBoostingClassifier(**params).fit(X, 2 * Y - 1)
    sparse = GradientBoostingClassifier(**params).fit(X, sp.csr_matrix(Y))
    proba = zero_one.predict_proba(Xt)
    np.testing.assert_allclose(proba, scipy.special.expit(zero_one.decision_function(Xt)))
    np.testing.assert_allclose(signed.predict_proba(Xt), proba, rtol=1e-12)
    np.testing.assert_allclose(sparse.predict_proba(Xt), proba, rtol=1e-12)
    np.testing.assert_array_equal(zero_one.predict(Xt), (proba > 0.5).astype(int))
    np.testing.assert_array_equal(signed.predict(Xt), np.where(proba > 0.5, 1, -1))
    np.testing.assert_array_equal(signed.classes_, [-1, 1])
    lrap = label_ranking_average_precision_score(Yt, proba)
    prior = label_ranking_average_precision_score(Yt, np.broadcast_to(Y.mean(axis=0), Yt.shape))
    assert lrap > prior + 0.05


def test_classifier_single_label_probabilities_and_predictions():
    X, Y = multilabel(150, 3, 4)
    y = Y[:, 0]
    model = GradientBoostingClassifier(n_estimators=5, max_leaf_nodes=4, random_state=0).fit(X, y)
    F = model.decision_function(X)
    assert F.shape == (150,)
    proba = model.predict_proba(X)
    assert proba.shape == (150, 2)
    np.testing.assert_allclose(proba[:, 1], scipy.special.expit(F), rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(X), model.classes_[(F > 0).astype(int)])
    majority = max(y.mean(), 1.0 - y.mean())
    assert np.mean(model.predict(X) == y) > majority + 0.05


# --------------------------------------------------------------------------
# Weights, subsampling, missing values, sparse inputs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["multi_output", "rpo"])
def test_integer_sample_weights_equal_repeated_rows(strategy):
    X, Y = integer_regression(120, 3, 11, d=3)
    counts = np.random.default_rng(0).integers(0, 4, size=120)
    params = dict(strategy=strategy, n_estimators=8, max_leaf_nodes=5, projection="gaussian",
                  random_state=0)
    weighted = GradientBoostingRegressor(**params).fit(X, Y, sample_weight=counts)
    repeated = GradientBoostingRegressor(**params).fit(
        np.repeat(X, counts, axis=0), np.repeat(Y, counts, axis=0)
    )
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-8, atol=1e-8)


def test_subsample_changes_the_model_and_still_learns():
    X, Y = make_friedman1_multioutput("group", n_samples=300, n_outputs=4, random_state=12)
    Xv, Yv = make_friedman1_multioutput("group", n_samples=200, n_outputs=4, random_state=13)
    full = GradientBoostingRegressor(n_estimators=40, max_leaf_nodes=6, random_state=0).fit(X, Y)
    sub = GradientBoostingRegressor(n_estimators=40, max_leaf_nodes=6, subsample=0.5,
                                    random_state=0).fit(X, Y)
    assert not np.allclose(full.predict(Xv), sub.predict(Xv))
    assert r2_score(Yv, sub.predict(Xv)) > 0.6


def test_tree_size_parameters():
    X, Y = make_friedman1_multioutput("chain", n_samples=200, n_outputs=3, random_state=15)
    level_wise = GradientBoostingRegressor(
        n_estimators=4, max_leaf_nodes=None, max_depth=2, random_state=0
    ).fit(X, Y)
    both = GradientBoostingRegressor(
        n_estimators=4, max_leaf_nodes=3, max_depth=5, min_samples_leaf=20, random_state=0
    ).fit(X, Y)
    for stage in level_wise._model.stages:
        assert stage.structure.max_depth <= 2 and stage.structure.n_leaves == 4
    for stage in both._model.stages:
        assert stage.structure.n_leaves == 3
        assert stage.structure.n_node_samples[stage.structure.feature < 0].min() >= 20
    # one random feature per node gives a different, still learning, model
    one = GradientBoostingRegressor(n_estimators=30, max_features=1, random_state=0).fit(X, Y)
    full = GradientBoostingRegressor(n_estimators=30, random_state=0).fit(X, Y)
    assert not np.allclose(one.predict(X), full.predict(X))
    assert r2_score(Y, one.predict(X)) > 0.5


def test_missing_values_and_sparse_inputs():
    X, Y = make_friedman1_multioutput("group", n_samples=200, n_outputs=3, random_state=14)
    Xm = X.copy()
    Xm[::7, 0] = np.nan
    model = GradientBoostingRegressor(n_estimators=10, max_leaf_nodes=4, random_state=0)
    pred = model.fit(Xm, Y).predict(Xm)
    assert np.all(np.isfinite(pred))
    Xs = X.copy()
    Xs[Xs < 0.5] = 0.0
    dense = GradientBoostingRegressor(n_estimators=8, max_leaf_nodes=4, random_state=0)
    sparse = clone(dense)
    np.testing.assert_allclose(
        sparse.fit(sp.csr_matrix(Xs), Y).predict(sp.csr_matrix(Xs)),
        dense.fit(Xs, Y).predict(Xs),
        rtol=1e-10,
    )


# --------------------------------------------------------------------------
# scikit-learn conventions and bad input
# --------------------------------------------------------------------------


def test_clone_and_get_params():
    est = GradientBoostingRegressor(strategy="relabel_rpo", n_components=3, learning_rate=0.05)
    params = est.get_params()
    assert params["strategy"] == "relabel_rpo" and params["n_components"] == 3
    twin = clone(est)
    assert twin.get_params() == params
    clf = GradientBoostingClassifier(projection="gaussian", subsample=0.5)
    assert clone(clf).get_params() == clf.get_params()
    X, Y = multilabel(80, 3, 5)
    fitted = clf.set_params(n_estimators=3, max_leaf_nodes=3).fit(X, Y)
    assert not hasattr(clone(fitted), "n_estimators_")


@parametrize_with_checks(
    [
        GradientBoostingRegressor(
            n_estimators=10, max_leaf_nodes=6, learning_rate=0.3, random_state=0
        ),
        GradientBoostingRegressor(
            loss="absolute_error", leaf_step="per_leaf", n_estimators=10, max_leaf_nodes=6,
            learning_rate=0.3, random_state=0,
        ),
        GradientBoostingRegressor(
            strategy="relabel_rpo", split_criterion="newton", reg_lambda=0.5, n_estimators=10,
            max_leaf_nodes=6, learning_rate=0.3, random_state=0,
        ),
        GradientBoostingClassifier(
            n_estimators=10, max_leaf_nodes=6, learning_rate=0.3, random_state=0
        ),
        GradientBoostingClassifier(
            strategy="relabel_rpo", projection="gaussian", n_components=2, n_estimators=10,
            max_leaf_nodes=6, learning_rate=0.3, random_state=0,
        ),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    # The classifier runs every check too: a 1-D y holds class labels (binary,
    # or one-vs-rest labels for three classes or more).
    check(estimator)


def test_pickle_round_trip():
    X, Y = multilabel(120, 4, 6)
    model = GradientBoostingClassifier(n_estimators=6, max_leaf_nodes=4, random_state=0)
    model.fit(X, Y)
    clone_ = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone_.predict_proba(X), model.predict_proba(X))
    assert clone_.apply(X).shape == (120, 6)


@pytest.mark.parametrize(
    "cls, strategy, leaf_step, criterion, loss",
    [(GradientBoostingRegressor, "rpo", "global", "gradient", None),
     (GradientBoostingClassifier, "relabel_rpo", "global", "gradient", None),
     (GradientBoostingClassifier, "rpo", "per_leaf", "gradient", None),
     (GradientBoostingClassifier, "relabel_rpo", "global", "newton", None),
     (GradientBoostingClassifier, "multi_output", "global", "newton", None),
     # weighted medians: the CPU's selection kernels against the array version
     (GradientBoostingRegressor, "rpo", "global", "gradient", "absolute_error"),
     (GradientBoostingRegressor, "relabel_rpo", "per_leaf", "gradient", "absolute_error")],
)
def test_emulated_cuda_backend_gives_the_same_model(cls, strategy, leaf_step, criterion, loss):
    """The CUDA path (kernels run by the CPU emulation of CUDA) equals the numba path."""
    if cls is GradientBoostingRegressor:
        X, Y = make_friedman1_multioutput("group", n_samples=150, n_outputs=3, random_state=0)
    else:
        X, Y = multilabel(150, 5, 7)
    params = dict(strategy=strategy, n_estimators=4, max_leaf_nodes=4, subsample=0.8,
                  leaf_step=leaf_step, split_criterion=criterion, random_state=0)
    if loss is not None:
        params["loss"] = loss
    cpu = cls(**params).fit(X, Y)
    emulated = cls(device="cuda-emulated", **params).fit(X, Y)
    assert emulated.backend_.name == "emulated"
    np.testing.assert_allclose(emulated.predict(X), cpu.predict(X), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(emulated.steps_, cpu.steps_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    "params, error, match",
    [
        # a value of the right type out of its range or set of choices
        ({"strategy": "chain"}, ValueError,
         r"strategy must be one of \('multi_output', 'rpo', 'relabel_rpo', 'single_target'\), "
         "got 'chain'"),
        ({"loss": "log_loss"}, ValueError,
         r"loss must be one of \('squared_error', 'absolute_error'\), got 'log_loss'"),
        ({"projection": "orthogonal"}, ValueError,
         r"projection must be one of \('gaussian', .*\) or None, got 'orthogonal'"),
        ({"strategy": "rpo", "projection": None}, ValueError,
         "strategy='rpo' .* needs a projection kind .* got projection=None"),
        ({"strategy": "relabel_rpo", "n_components": 10}, ValueError,
         "n_components=10 gives 10 components, more than the 3 outputs"),
        ({"strategy": "relabel_rpo", "n_components": "lots"}, ValueError,
         "n_components must be an int >= 1, .* got 'lots'"),
        ({"learning_rate": 0.0}, ValueError, r"learning_rate must be > 0\.0, got 0\.0"),
        ({"n_estimators": 0}, ValueError, "n_estimators must be >= 1, got 0"),
        ({"max_leaf_nodes": 1}, ValueError, "max_leaf_nodes must be >= 2, got 1"),
        ({"max_leaf_nodes": None, "max_depth": None}, ValueError,
         "max_leaf_nodes and max_depth are both None: boosting needs small trees, set at least "
         "one of them"),
        ({"subsample": 0.0}, ValueError, r"subsample must be > 0\.0, got 0\.0"),
        ({"subsample": 1.5}, ValueError, r"subsample must be <= 1\.0, got 1\.5"),
        ({"max_bins": 300}, ValueError, r"max_bins must be in \[2, 255\], got 300"),
        ({"max_features": 7}, ValueError,
         r"max_features given as an int must be in \[1, n_features=5\], got 7"),
        ({"max_features": "all"}, ValueError, "max_features must be None, .* got 'all'"),
        ({"n_iter_no_change": 0}, ValueError, "n_iter_no_change must be >= 1, got 0"),
        ({"validation_fraction": 1.0}, ValueError,
         r"validation_fraction must be < 1\.0, got 1\.0"),
        ({"device": "tpu"}, ValueError, r"device must be one of \(.*\), got 'tpu'"),
        ({"split_criterion": "hessian"}, ValueError,
         r"split_criterion must be one of \('gradient', 'newton'\), got 'hessian'"),
        ({"split_criterion": "newton", "reg_lambda": -1.0}, ValueError,
         r"reg_lambda must be >= 0\.0, got -1\.0"),
        ({"split_criterion": "newton", "loss": "absolute_error"}, ValueError,
         "split_criterion='newton' needs the second derivative of the loss; "
         "loss='absolute_error' has none"),
        ({"split_criterion": "newton", "min_child_weight": -1.0}, ValueError,
         r"min_child_weight must be >= 0\.0, got -1\.0"),
        # a value of the wrong type
        ({"n_estimators": 2.5}, TypeError, r"n_estimators must be an int, got float 2\.5"),
        ({"max_leaf_nodes": 4.0}, TypeError, r"max_leaf_nodes must be an int, got float 4\.0"),
        ({"max_bins": "many"}, TypeError, "max_bins must be an int, got str 'many'"),
        ({"verbose": 0.5}, TypeError, r"verbose must be an int, got float 0\.5"),
        ({"learning_rate": "0.1"}, TypeError,
         r"learning_rate must be a real number, got str '0\.1'"),
        ({"subsample": None}, TypeError, "subsample must be a real number, got NoneType None"),
        ({"warm_start": "yes"}, TypeError, "warm_start must be a bool, got 'yes'"),
    ],
)
def test_bad_parameters(params, error, match):
    X, Y = make_friedman1_multioutput("group", n_samples=40, n_outputs=3, random_state=0)
    with pytest.raises(error, match=match) as info:
        GradientBoostingRegressor(**{"n_estimators": 2, **params}).fit(X, Y)
    assert type(info.value) is error  # not a subclass standing in for it


def test_bad_data():
    X, Y = make_friedman1_multioutput("group", n_samples=40, n_outputs=3, random_state=0)
    est = GradientBoostingRegressor(n_estimators=2, max_leaf_nodes=3)
    Ynan = Y.copy()
    Ynan[0, 0] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        est.fit(X, Ynan)
    Xinf = X.copy()
    Xinf[0, 0] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        est.fit(Xinf, Y)
    with pytest.raises(ValueError, match="inconsistent numbers of rows"):
        est.fit(X[:30], Y)
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(40,\)"):
        est.fit(X, Y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        est.fit(X, Y, sample_weight=-np.ones(40))
    with pytest.raises(ValueError, match="eval_set must be a pair"):
        est.fit(X, Y, eval_set=(X,))
    with pytest.raises(ValueError, match="eval_set must have 5 features and 3 outputs"):
        est.fit(X, Y, eval_set=(X, Y[:, :2]))
    with pytest.raises(NotFittedError, match="not fitted"):
        est.predict(X)
    est.fit(X, Y)
    with pytest.raises(ValueError, match="X has 4 features, but .* expecting 5"):
        est.predict(X[:, :4])
    clf = GradientBoostingClassifier(n_estimators=2, max_leaf_nodes=3)
    with pytest.raises(ValueError, match=r"0/1 or -1/1 .* got the values \[0.0, 1.0, 2.0\]"):
        clf.fit(X, np.tile([[0, 1], [2, 1]], (20, 1)))
    with pytest.raises(ValueError, match=r"got the values \[-1.0, 0.0, 1.0\]"):
        clf.fit(X, np.tile([[0, 1], [-1, 1]], (20, 1)))
    with pytest.raises(ValueError, match="loss must be one of \\('log_loss',\\)"):
        GradientBoostingClassifier(loss="squared_error").fit(X, (Y > 10).astype(int))


# --------------------------------------------------------------------------
# leaf_step="per_leaf": one optimal value per (leaf, output)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_per_leaf_log_loss_adds_one_newton_step_per_leaf_and_output(strategy):
    X, Y = multilabel(300, 6, 1)
    lr = 0.5
    model = GradientBoostingClassifier(
        strategy=strategy, leaf_step="per_leaf", n_estimators=1, max_leaf_nodes=5,
        learning_rate=lr, random_state=0,
    ).fit(X, Y)
    n, d = Y.shape
    F0 = np.tile(model.init_, (n, 1))
    P = scipy.special.expit(F0)
    expected = F0.copy()
    cols = [0] if strategy == "single_target" else list(range(d))
    leaf = model.apply(X)[:, 0]
    assert len(np.unique(leaf)) >= 3
    for lf in np.unique(leaf):
        rows = leaf == lf
        g = (Y[rows] - P[rows]).sum(axis=0)
        h = (P[rows] * (1 - P[rows])).sum(axis=0)
        expected[np.ix_(rows, cols)] += lr * np.clip(g / h, -10, 10)[cols]
    np.testing.assert_allclose(model.decision_function(X), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.steps_[0][cols], 1.0)


def test_per_leaf_equals_global_step_for_squared_error_multi_output():
    """l2, multi-output tree: the global least-squares step of mean-gradient leaves is 1."""
    X, Y = integer_regression(300, 4, 2, d=3)
    a = GradientBoostingRegressor(
        strategy="multi_output", n_estimators=15, max_leaf_nodes=6, random_state=0
    ).fit(X, Y)
    b = clone(a).set_params(leaf_step="per_leaf").fit(X, Y)
    np.testing.assert_allclose(a.steps_, 1.0, rtol=1e-5)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-5, atol=1e-5)


def test_per_leaf_rpo_fits_better_than_global_rpo_on_multilabel_data():
    X, Y = multilabel(600, 12, 3)
    common = dict(strategy="rpo", n_estimators=20, max_leaf_nodes=8, random_state=0)
    glob = GradientBoostingClassifier(**common).fit(X, Y)
    leafy = GradientBoostingClassifier(leaf_step="per_leaf", **common).fit(X, Y)
    assert leafy.train_loss_[-1] < glob.train_loss_[-1]


def test_leaf_step_is_validated():
    X, Y = integer_regression(50, 3, 0)
    with pytest.raises(ValueError, match="leaf_step"):
        GradientBoostingRegressor(leaf_step="newton").fit(X, Y)


# --------------------------------------------------------------------------
# split_criterion="newton": XGBoost's second-order split gain
# --------------------------------------------------------------------------


def _partitions(X):
    """Every split ``x_f <= v`` of the rows (feature, value, left mask), both sides non-empty."""
    for f in range(X.shape[1]):
        for v in np.unique(X[:, f])[:-1]:
            yield f, v, X[:, f] <= v


def test_log_loss_hessian_is_the_derivative_of_the_negative_gradient():
    from gpurpo.backend import resolve_backend
    from gpurpo.ensemble.boosting.losses import get_loss

    rng = np.random.default_rng(0)
    Y = np.where(rng.random((30, 4)) < 0.3, 1.0, -1.0)
    F = rng.normal(scale=3.0, size=(30, 4))
    backend = resolve_backend(Y, device="cpu")
    loss = get_loss("log_loss")
    eps = 1e-4
    grad_plus = loss.negative_gradient(backend, Y, F + eps).astype(np.float64)
    grad_minus = loss.negative_gradient(backend, Y, F - eps).astype(np.float64)
    finite = -(grad_plus - grad_minus) / (2 * eps)
    hess = loss.hessian(backend, loss.negative_gradient(backend, Y, F))
    assert hess.dtype == np.float32 and hess.shape == Y.shape
    np.testing.assert_allclose(hess, finite, rtol=2e-3, atol=2e-3)
    assert get_loss("squared_error").hessian(backend, F) is None


def _second_split_data(seed=5, n=160, d=3):
    """Labels whose logits differ per output, so their hessians differ per output."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 12, size=(n, 3)).astype(float)
    base = np.where(X[:, 0] > 6, 4.0, -1.0) + 0.4 * X[:, 1] - 2.0 + 0.5 * X[:, 2] * (X[:, 0] < 3)
    shift = np.linspace(-1.5, 1.5, d)
    logit = base[:, None] * np.linspace(0.5, 1.5, d)[None, :] + shift[None, :]
    Y = (rng.random((n, d)) < scipy.special.expit(logit)).astype(int)
    return X, Y


@pytest.mark.parametrize(
    "strategy, projection, newton",
    [("multi_output", None, (0.0, 0.0)), ("multi_output", None, (1.0, 1.0)),
     ("relabel_rpo", "gaussian", (1.0, 0.0)), ("relabel_rpo", "subsample", (0.5, 0.5)),
     ("rpo", "gaussian", (1.0, 0.0))],
)
def test_newton_split_is_the_brute_force_argmax_of_the_second_order_gain(
    strategy, projection, newton
):
    """The second split of a boosting run maximises sum_k G_k^2 / (H_k + lambda).

    ``G_k = sum_i phi_k . g_i`` and ``H_k = sum_i sum_j phi_kj^2 h_ij`` over the
    projection rows phi_k (the identity for multi_output), counted where
    ``H_k >= min_child_weight``: XGBoost's vector-leaf gain, checked by trying
    every partition of the rows.
    """
    X, Y = _second_split_data()
    lam, mcw = newton
    params = dict(strategy=strategy, max_leaf_nodes=2, learning_rate=1.0, reg_lambda=lam,
                  min_child_weight=mcw, random_state=0, n_components=2)
    if projection is not None:
        params["projection"] = projection
    # one gradient tree gives rows different scores, hence different hessians
    first = GradientBoostingClassifier(n_estimators=1, **params).fit(X, Y)
    P = scipy.special.expit(first.decision_function(X))
    g, h = Y - P, P * (1.0 - P)

    second = GradientBoostingClassifier(n_estimators=1, warm_start=True, **params).fit(X, Y)
    second.set_params(n_estimators=2, split_criterion="newton").fit(X, Y)
    np.testing.assert_array_equal(second.apply(X)[:, 0], first.apply(X)[:, 0])
    if projection is None:
        phi = np.eye(Y.shape[1])
    else:
        phi = second.projections_[1]
        phi = np.asarray(phi.toarray() if sp.issparse(phi) else phi)
    gp, hp = g @ phi.T, h @ (phi**2).T

    def score(rows):
        G, H = gp[rows].sum(0), hp[rows].sum(0)
        ok = H >= mcw
        return np.sum(np.where(ok, G**2 / (H + lam), 0.0))

    gains = [(score(left) + score(~left), left) for _, _, left in _partitions(X)]
    best = max(gain for gain, _ in gains)
    leaf = second.apply(X)[:, 1]
    chosen = leaf == leaf[0]
    chosen_gain = score(chosen) + score(~chosen)
    np.testing.assert_allclose(chosen_gain, best, rtol=1e-5)
    # and the gradient criterion chooses another split on this data
    if strategy == "multi_output" and newton == (0.0, 0.0):
        grad = GradientBoostingClassifier(n_estimators=2, **params).fit(X, Y)
        other = grad.apply(X)[:, 1]
        other_left = other == other[0]
        assert score(other_left) + score(~other_left) < best - 1e-6


def test_newton_relabel_rpo_without_projection_equals_multi_output():
    X, Y = _second_split_data(seed=7, n=200, d=4)
    params = dict(n_estimators=5, max_leaf_nodes=6, split_criterion="newton", random_state=0)
    multi = GradientBoostingClassifier(strategy="multi_output", **params).fit(X, Y)
    relabel = GradientBoostingClassifier(strategy="relabel_rpo", projection=None, **params).fit(X, Y)
    np.testing.assert_array_equal(relabel.apply(X), multi.apply(X))
    np.testing.assert_allclose(relabel.decision_function(X), multi.decision_function(X))


def test_newton_single_target_splits_on_its_output_alone():
    X, Y = _second_split_data(seed=6, n=200, d=3)
    params = dict(strategy="single_target", n_estimators=6, max_leaf_nodes=4,
                  split_criterion="newton", random_state=0)
    model = GradientBoostingClassifier(**params).fit(X, Y)
    assert np.all(np.diff(model.train_loss_) <= 1e-12)
    # output 1's trees equal those of the same boosting run on output 1 alone
    alone = GradientBoostingClassifier(**{**params, "n_estimators": 2}).fit(X, Y[:, 1:2])
    np.testing.assert_array_equal(model.apply(X)[:, 1], alone.apply(X)[:, 0])


@pytest.mark.parametrize("strategy", ["multi_output", "rpo", "relabel_rpo"])
def test_newton_split_equals_gradient_split_for_squared_error(strategy):
    X, Y = integer_regression(150, 3, 4, d=3)
    params = dict(strategy=strategy, n_estimators=6, max_leaf_nodes=5, subsample=0.8,
                  random_state=0)
    grad = GradientBoostingRegressor(**params).fit(X, Y)
    newton = GradientBoostingRegressor(split_criterion="newton", **params).fit(X, Y)
    np.testing.assert_array_equal(newton.predict(X), grad.predict(X))


@pytest.mark.parametrize("strategy", ["multi_output", "rpo", "relabel_rpo"])
def test_newton_split_learns_and_differs_from_the_gradient_split(strategy):
    X, Y = multilabel(800, 8, 5)
    X, Y, Xt, Yt = X[:500], Y[:500], X[500:], Y[500:]
    params = dict(strategy=strategy, n_estimators=15, max_leaf_nodes=8, projection="gaussian",
                  random_state=0)
    grad = GradientBoostingClassifier(**params).fit(X, Y)
    newton = GradientBoostingClassifier(split_criterion="newton", **params).fit(X, Y)
    assert not np.allclose(newton.decision_function(Xt), grad.decision_function(Xt))
    assert np.all(np.diff(newton.train_loss_) <= 1e-12)
    base = label_ranking_average_precision_score(Yt, np.zeros_like(Yt, dtype=float) + Y.mean(0))
    score = label_ranking_average_precision_score(Yt, newton.predict_proba(Xt))
    assert score > base + 0.05
    assert score > label_ranking_average_precision_score(Yt, grad.predict_proba(Xt)) - 0.03


def test_newton_split_with_weights_subsample_warm_start_and_early_stopping():
    X, Y = multilabel(240, 6, 8)
    params = dict(strategy="relabel_rpo", split_criterion="newton", max_leaf_nodes=5,
                  subsample=0.8, projection="gaussian", n_components=3, random_state=2)
    full = GradientBoostingClassifier(n_estimators=10, **params).fit(X, Y)
    warm = GradientBoostingClassifier(n_estimators=4, warm_start=True, **params).fit(X, Y)
    warm.set_params(n_estimators=10).fit(X, Y)
    np.testing.assert_allclose(warm.decision_function(X), full.decision_function(X), rtol=1e-9,
                               atol=1e-9)
    staged = list(full.staged_decision_function(X))
    np.testing.assert_allclose(staged[-1], full.decision_function(X), rtol=1e-10, atol=1e-10)

    counts = np.random.default_rng(0).integers(0, 4, size=X.shape[0])
    no_sub = dict(params, subsample=1.0, strategy="multi_output")
    weighted = GradientBoostingClassifier(n_estimators=6, **no_sub).fit(X, Y, sample_weight=counts)
    repeated = GradientBoostingClassifier(n_estimators=6, **no_sub).fit(
        np.repeat(X, counts, axis=0), np.repeat(Y, counts, axis=0)
    )
    np.testing.assert_allclose(weighted.decision_function(X), repeated.decision_function(X),
                               rtol=1e-6, atol=1e-6)

    stopped = GradientBoostingClassifier(
        n_estimators=300, learning_rate=0.5, n_iter_no_change=3, validation_fraction=0.3,
        **{k: v for k, v in params.items() if k != "random_state"}, random_state=0,
    ).fit(X, Y)
    assert stopped.n_estimators_ < 300
    assert stopped.n_estimators_ == int(np.argmin(stopped.validation_loss_))


def test_newton_parameters_survive_clone():
    model = GradientBoostingClassifier(split_criterion="newton", reg_lambda=0.25)
    params = clone(model).get_params()
    assert params["split_criterion"] == "newton" and params["reg_lambda"] == 0.25
    assert GradientBoostingRegressor().get_params()["split_criterion"] == "gradient"


@pytest.mark.parametrize("Model", [GradientBoostingRegressor, GradientBoostingClassifier])
def test_out_of_memory_says_what_boosting_keeps_and_what_to_lower(Model, monkeypatch):
    from gpurpo.ensemble.boosting import _base as boosting

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 8.94 GiB")

    monkeypatch.setattr(boosting.StagedModel, "__init__", exhausted)
    X = np.random.default_rng(0).normal(size=(40, 3))
    Y = (X[:, :2] > 0).astype(float)
    with pytest.raises(MemoryError) as info:
        Model(n_estimators=2).fit(X, Y)
    message = str(info.value)
    assert f"while fitting {Model.__name__}" in message
    assert "(n=40, d=2: 0.00 GiB for each (n, d) float64 array)" in message
    assert "LabelSpaceClassifier" in message and "RandomForestClassifier" in message
    assert message.endswith("Original error: Unable to allocate 8.94 GiB")
    assert isinstance(info.value.__cause__, MemoryError)
