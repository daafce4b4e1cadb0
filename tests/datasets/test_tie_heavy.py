"""The tie-heavy multi-target generators: the structure each one promises."""

import numpy as np
import pytest

from gpurpo.datasets import make_correlated_counts, make_duplicated_features, make_few_valued_features


def test_correlated_counts_are_multiples_of_five_and_correlated():
    X, Y = make_correlated_counts(300, 40, 6, 3, random_state=0)
    assert X.shape == (300, 40) and Y.shape == (300, 6)
    np.testing.assert_array_equal(X % 5, 0)
    assert (X >= 0).all()
    # a few shared factors: the features are strongly correlated on the log scale
    corr = np.corrcoef(np.log1p(X), rowvar=False)
    assert np.median(np.abs(corr[np.triu_indices(40, 1)])) > 0.3
    # and many rows share values, so splits tie
    assert np.mean([len(np.unique(c)) for c in X.T]) < 0.8 * 300


def test_duplicated_features_come_in_identical_groups():
    X, Y = make_duplicated_features(50, 5, 3, 2, random_state=1)
    assert X.shape == (50, 15) and Y.shape == (50, 2)
    for f in range(5):
        block = X[:, 3 * f : 3 * f + 3]
        np.testing.assert_array_equal(block, np.repeat(block[:, :1], 3, axis=1))
    assert not np.array_equal(X[:, 0], X[:, 3])


def test_few_valued_features_take_their_values():
    X, Y = make_few_valued_features(500, 10, 4, 3, random_state=2)
    assert set(np.unique(X)) == {0.0, 1.0, 2.0, 3.0}
    assert Y.shape == (500, 3)


def test_a_seed_gives_the_same_data():
    for make in (make_correlated_counts, make_duplicated_features, make_few_valued_features):
        a, b = make(random_state=7), make(random_state=7)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: make_correlated_counts(n_samples=1), ValueError, r"n_samples must be >= 2, got 1"),
        (lambda: make_duplicated_features(n_features=3, n_outputs=3), ValueError,
         r"n_outputs must be below n_features \(3\), got 3"),
        (lambda: make_few_valued_features(n_values=1), ValueError, "n_values must be at least 2, got 1"),
        (lambda: make_few_valued_features(n_features=2.5), TypeError, "n_features must be an int, got float 2.5"),
    ],
)
def test_bad_sizes_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
