"""Progress reports of gradient boosting: a tqdm bar over the rounds, a table at verbose=2.

References: the losses the fitted model records (``train_loss_``,
``validation_loss_``), scikit-learn's ``r2_score`` and
``label_ranking_average_precision_score`` on the staged predictions, and the
number of rounds counted from the recorded validation losses.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import label_ranking_average_precision_score, r2_score

from gpurpo.datasets import make_friedman1_multioutput, make_multilabel
from gpurpo.ensemble import GradientBoostingClassifier, GradientBoostingRegressor


def _data(n=120, seed=0):
    return make_friedman1_multioutput("group", n_samples=n, n_outputs=3, random_state=seed)


def _final_bar(err):
    """The last state of a tqdm bar written to a file (carriage returns between states)."""
    return err.replace("\r", "\n").strip().splitlines()[-1]


def test_verbose_1_shows_a_bar_on_stderr_with_the_latest_losses(capsys):
    X, Y = _data()
    Xv, Yv = _data(60, seed=1)
    model = GradientBoostingRegressor(n_estimators=12, max_leaf_nodes=4, verbose=1,
                                      random_state=0).fit(X, Y, eval_set=(Xv, Yv))
    captured = capsys.readouterr()
    assert captured.out == ""  # the bar goes to stderr, and no table at verbose=1
    final = _final_bar(captured.err)
    assert final.startswith("GradientBoostingRegressor") and "12/12" in final
    assert final.endswith(f"train loss={model.train_loss_[-1]:.6g}, "
                          f"val loss={model.validation_loss_[-1]:.6g}]")
    # without a validation set the postfix is the training loss alone
    model = GradientBoostingRegressor(n_estimators=7, max_leaf_nodes=4, verbose=1,
                                      random_state=0).fit(X, Y)
    captured = capsys.readouterr()
    assert captured.out == ""
    final = _final_bar(captured.err)
    assert "7/7" in final and final.endswith(f"train loss={model.train_loss_[-1]:.6g}]")


def test_verbose_0_is_silent(capsys):
    X, Y = _data()
    Xv, Yv = _data(60, seed=1)
    GradientBoostingRegressor(n_estimators=5, max_leaf_nodes=4, random_state=0).fit(
        X, Y, eval_set=(Xv, Yv)
    )
    GradientBoostingRegressor(n_estimators=40, max_leaf_nodes=4, n_iter_no_change=2,
                              learning_rate=0.9, random_state=0).fit(X, Y)
    assert capsys.readouterr() == ("", "")


def test_verbose_2_writes_a_line_per_round(capsys):
    X, Y = _data()
    Xv, Yv = _data(60, seed=1)
    model = GradientBoostingRegressor(n_estimators=12, max_leaf_nodes=4, verbose=2,
                                      random_state=0).fit(X, Y, eval_set=(Xv, Yv))
    captured = capsys.readouterr()
    assert "12/12" in _final_bar(captured.err)
    header, *rows = captured.out.splitlines()
    assert header.split() == ["Iter", "Train", "loss", "Val", "loss", "Val", "R2", "Elapsed"]
    assert [int(row.split()[0]) for row in rows] == list(range(1, 13))
    table = np.array([[float(v) for v in row.split()[1:4]] for row in rows])
    np.testing.assert_allclose(table[:, 0], model.train_loss_, rtol=1e-5)
    np.testing.assert_allclose(table[:, 1], model.validation_loss_[1:], rtol=1e-5)
    r2 = [r2_score(Yv, P) for P in model.staged_predict(Xv)]
    np.testing.assert_allclose(table[:, 2], r2, atol=1e-4)
    elapsed = [float(row.split()[-1].rstrip("s")) for row in rows]
    assert elapsed == sorted(elapsed)


def test_verbose_2_classifier_reports_the_validation_lrap(capsys):
    X, Y = make_multilabel(n_samples=200, n_features=10, n_labels=5, label_cardinality=2.0,
                           sparse_output=False, random_state=3)
    X, Y = np.asarray(X), np.asarray(Y)
    model = GradientBoostingClassifier(n_estimators=4, max_leaf_nodes=4, verbose=2,
                                       random_state=0).fit(X[:150], Y[:150],
                                                           eval_set=(X[150:], Y[150:]))
    captured = capsys.readouterr()
    header, *rows = captured.out.splitlines()
    assert header.split()[5:7] == ["Val", "LRAP"]
    keep = Y[150:].sum(axis=1) > 0
    lrap = [label_ranking_average_precision_score(Y[150:][keep], P[keep])
            for P in model.staged_predict_proba(X[150:])]
    np.testing.assert_allclose([float(row.split()[3]) for row in rows], lrap, atol=1e-4)
    assert "4/4" in _final_bar(captured.err)


@pytest.mark.parametrize("verbose", [1, 2])
def test_early_stopping_ends_the_bar_at_the_last_round(capsys, verbose):
    X, Y = make_friedman1_multioutput("group", n_samples=300, n_outputs=4, noise=3.0,
                                      random_state=8)
    model = GradientBoostingRegressor(
        strategy="multi_output", n_estimators=500, max_leaf_nodes=16, learning_rate=0.5,
        n_iter_no_change=5, validation_fraction=0.3, random_state=0, verbose=verbose,
    ).fit(X, Y)
    rounds = len(model.validation_loss_) - 1  # the first recorded loss is the initial model's
    assert rounds < 500
    captured = capsys.readouterr()
    final = _final_bar(captured.err)
    # the total shrinks to the rounds boosted: the bar ends full, not at rounds/500
    assert f"{rounds}/{rounds}" in final and "/500" not in final
    assert final.endswith(f"stopped, best iteration {model.n_estimators_}]")
    if verbose == 2:
        lines = captured.out.splitlines()
        assert [int(row.split()[0]) for row in lines[1:-1]] == list(range(1, rounds + 1))
        assert lines[-1] == (f"stopped at iteration {rounds}: 5 iterations without improvement "
                             f"of the validation loss; keeping the first {model.n_estimators_}")
    else:
        assert captured.out == ""


def test_warm_start_bar_continues_from_the_fitted_rounds(capsys):
    X, Y = _data()
    model = GradientBoostingRegressor(n_estimators=5, max_leaf_nodes=4, warm_start=True,
                                      random_state=0).fit(X, Y)
    model.set_params(n_estimators=9, verbose=2).fit(X, Y)
    captured = capsys.readouterr()
    assert "9/9" in _final_bar(captured.err)
    assert [int(row.split()[0]) for row in captured.out.splitlines()[1:]] == [6, 7, 8, 9]
