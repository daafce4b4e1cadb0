"""Reference of the feature visiting rule of the split search (scikit-learn's).

Kept apart from the library so that kernel tests check the kernels against an
independent statement of the rule: a node draws ``k`` features in its random
order, constant ones included, and evaluates the non-constant ones; when all
``k`` are constant it draws on, up to the first feature that is not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def visited_features(order: Sequence[int], varies: Callable[[int], bool], k: int) -> list[int]:
    """The features a node evaluates, in visiting order."""
    chosen = [int(f) for f in order[:k] if varies(int(f))]
    if chosen:
        return chosen
    for f in order[k:]:
        if varies(int(f)):
            return [int(f)]
    return []
