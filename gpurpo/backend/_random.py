"""Random numbers: one seeded host generator per estimator, seeds spawned from it."""

from __future__ import annotations

from typing import Any

import numpy as np


def check_random_state(random_state: Any) -> np.random.Generator:
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    Accepts ``None`` (fresh entropy), an int seed, a ``SeedSequence``, a
    ``Generator`` (returned as is) or a legacy ``RandomState`` (a seed is
    drawn from it). Random numbers are drawn on the host and moved to the
    device, so the same seed gives the same model on every backend.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        The seed or source of random numbers; an int must be non-negative.

    Returns
    -------
    numpy.random.Generator
        A new generator, or ``random_state`` itself when it is one.

    Raises
    ------
    ValueError
        If ``random_state`` is a negative int.
    TypeError
        If ``random_state`` has another type.
    """
    if random_state is None or isinstance(random_state, (int, np.integer, np.random.SeedSequence)):
        if isinstance(random_state, (int, np.integer)) and random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, an int, a numpy SeedSequence, Generator or "
        f"RandomState; got {type(random_state).__name__}"
    )


def spawn_seeds(random_state: Any, n: int) -> list[int]:
    """Draw ``n`` independent integer seeds from ``random_state``.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator or RandomState
        As in :func:`check_random_state`; a Generator is advanced.
    n : int
        Number of seeds.

    Returns
    -------
    list of int
        ``n`` Python ints in ``[0, 2**63 - 1)``.
    """
    rng = check_random_state(random_state)
    return [int(s) for s in rng.integers(0, 2**63 - 1, size=n, dtype=np.int64)]
