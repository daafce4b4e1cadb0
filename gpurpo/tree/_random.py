"""Counter-based randomness for per-node feature sampling and random cut points.

Tree growth needs, for every node, (a) a uniformly random ORDER of the
features, visited until ``k`` features that are not constant in the node have
been evaluated (scikit-learn's ``max_features`` semantics, Breiman 2001), and
(b) for Extra-Trees one uniform number per visited feature (the random cut
point of Geurts, Ernst & Wehenkel 2006). Both must be identical whichever
code path evaluates the node (NumPy/CuPy split scoring over histograms, the
numba small-node kernel or its CUDA twin), and must not cost ``O(p)`` random
draws per node.

So one 64-bit seed per node is drawn on the host from the estimator's
:class:`numpy.random.Generator`, and everything else is a pure function of
(seed, position):

* ``hash64`` is the SplitMix64 finaliser (Steele, Lea & Flood 2014);
* the feature visited at position ``i`` of node ``seed`` is
  ``feature_at(seed, i, p)``: a 4-round balanced Feistel network on
  ``2 * half`` bits (``2^(2 half) >= p``) keyed by ``hash64`` of the seed,
  restricted to ``[0, p)`` by cycle walking (Black & Rogaway 2002). It is a
  bijection of ``[0, p)`` for every seed, i.e. a pseudo-random permutation
  evaluated lazily, in O(1) memory;
* the uniform for position ``i`` is ``uniform_at(seed, i)``: the top 53 bits
  of a hash, times ``2^-53``, in ``[0, 1)``.

All arithmetic is on unsigned 64-bit integers with wrap-around
multiplication, so the NumPy (vectorised, also valid for CuPy through
``xp``), numba and CUDA implementations give bit-identical results.

The exact recipe (the CUDA twin must follow it)::

    hash64(x):  z = x + 0x9E3779B97F4A7C15
                z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
                z = (z ^ (z >> 27)) * 0x94D049BB133111EB
                return z ^ (z >> 31)
    round_key(seed, r) = hash64(seed ^ (0xD6E8FEB86659FD93 * (r + 1)))   r = 0..3
    bits = max(2, ceil(log2 p)) rounded up to even; half = bits / 2
    mask = 2^half - 1
    feistel(x): L = x >> half; R = x & mask
                for r in 0..3: L, R = R, L ^ (hash64(round_key(seed, r) ^ R) & mask)
                return (L << half) | R
    feature_at(seed, i, p) = 0 if p == 1, else x = feistel(i) repeated while x >= p
    uniform_at(seed, i) = (hash64(hash64(seed ^ 0xA0761D6478BD642F) + i) >> 11) * 2^-53
    child_seed(seed, 0) = hash64(seed ^ 0x8CB92BA72F3D8DD7)      (left child)
    child_seed(seed, 1) = hash64(seed ^ 0xE7037ED1A0B428DB)      (right child)

Only each tree's root seed is drawn on the host; every other node's seed is
``child_seed`` of its parent's (side 0: left child, 1: right child), so the
randomness of a node does not depend on the order in which nodes are
evaluated (level-wise, best-first or depth-first inside a kernel).

References
----------
G. L. Steele, D. Lea, C. H. Flood. Fast splittable pseudorandom number
generators. OOPSLA 2014.

J. Black, P. Rogaway. Ciphers with arbitrary finite domains. CT-RSA 2002.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numba
import numpy as np

__all__ = [
    "feistel_params",
    "hash64",
    "feature_at",
    "uniform_at",
    "child_seed",
    "hash64_nb",
    "child_seed_nb",
    "round_keys_nb",
    "feature_at_nb",
    "feature_table",
    "uniform_at_nb",
]

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_ROUND = 0xD6E8FEB86659FD93
_USALT = 0xA0761D6478BD642F
_LEFT = 0x8CB92BA72F3D8DD7
_RIGHT = 0xE7037ED1A0B428DB
_N_ROUNDS = 4
_MASK64 = (1 << 64) - 1


def feistel_params(p: int) -> tuple[int, int]:
    """``(half, mask)`` of the Feistel network used for ``p`` features."""
    bits = max(2, int(p - 1).bit_length())
    if bits % 2:
        bits += 1
    half = bits // 2
    return half, (1 << half) - 1


# --------------------------------------------------------------------------
# Vectorised versions (NumPy, or CuPy through ``xp``)
# --------------------------------------------------------------------------


def hash64(x: Any, xp: ModuleType = np) -> Any:
    """SplitMix64 finaliser of a uint64 array (wrap-around arithmetic)."""
    u = xp.uint64
    z = x.astype(u) + u(_GOLDEN)
    z = (z ^ (z >> u(30))) * u(_MIX1)
    z = (z ^ (z >> u(27))) * u(_MIX2)
    return z ^ (z >> u(31))


def feature_at(seed: Any, pos: Any, p: int, xp: ModuleType = np) -> Any:
    """Feature visited at position ``pos`` by nodes with seeds ``seed``.

    Parameters
    ----------
    seed : uint64 array
        Node seeds, broadcastable against ``pos``.
    pos : integer array
        Positions in ``[0, p)``.
    p : int
        Number of features.
    xp : module
        ``numpy`` or ``cupy``.

    Returns
    -------
    int32 array of the broadcast shape, values in ``[0, p)``; for a fixed
    seed, ``pos -> feature`` is a bijection of ``[0, p)``.
    """
    u = xp.uint64
    seed = xp.asarray(seed).astype(u)
    pos = xp.asarray(pos).astype(u)
    seed, pos = xp.broadcast_arrays(seed, pos)
    if p == 1:
        return xp.zeros(pos.shape, dtype=xp.int32)
    half, mask = feistel_params(p)
    keys = [hash64(seed ^ u((_ROUND * (r + 1)) & _MASK64), xp) for r in range(_N_ROUNDS)]
    x = pos.copy()
    todo = xp.ones(x.shape, dtype=bool)
    while True:
        left = x >> u(half)
        right = x & u(mask)
        for r in range(_N_ROUNDS):
            left, right = right, left ^ (hash64(keys[r] ^ right, xp) & u(mask))
        y = (left << u(half)) | right
        x = xp.where(todo, y, x)
        todo = x >= u(p)
        if not bool(todo.any()):
            break
    return x.astype(xp.int32)


def uniform_at(seed: Any, pos: Any, xp: ModuleType = np) -> Any:
    """Uniform numbers in ``[0, 1)`` for (node seed, position) pairs (float64)."""
    u = xp.uint64
    seed = xp.asarray(seed).astype(u)
    pos = xp.asarray(pos).astype(u)
    h = hash64(hash64(seed ^ u(_USALT), xp) + pos, xp)
    return (h >> u(11)).astype(xp.float64) * (2.0**-53)


def child_seed(seed: Any, side: int, xp: ModuleType = np) -> Any:
    """Seeds of the left (``side=0``) or right (``side=1``) children of nodes."""
    u = xp.uint64
    salt = u(_LEFT if side == 0 else _RIGHT)
    return hash64(xp.asarray(seed).astype(u) ^ salt, xp)


# --------------------------------------------------------------------------
# numba versions (used inside the CPU kernels)
# --------------------------------------------------------------------------


@numba.njit(inline="always", cache=True)
def hash64_nb(x: np.uint64) -> np.uint64:
    z = np.uint64(x) + np.uint64(_GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True)
def round_keys_nb(seed: np.uint64, keys: np.ndarray) -> None:
    for r in range(_N_ROUNDS):
        keys[r] = hash64_nb(np.uint64(seed) ^ (np.uint64(_ROUND) * np.uint64(r + 1)))


@numba.njit(cache=True)
def feature_at_nb(keys: np.ndarray, pos: int, p: int, half: int, mask: int) -> int:
    if p == 1:
        return 0
    uh = np.uint64(half)
    um = np.uint64(mask)
    x = np.uint64(pos)
    while True:
        left = x >> uh
        right = x & um
        for r in range(_N_ROUNDS):
            new_right = left ^ (hash64_nb(keys[r] ^ right) & um)
            left = right
            right = new_right
        x = (left << uh) | right
        if x < np.uint64(p):
            return np.int64(x)


@numba.njit(cache=True)
def uniform_at_nb(seed: np.uint64, pos: int) -> float:
    h = hash64_nb(hash64_nb(np.uint64(seed) ^ np.uint64(_USALT)) + np.uint64(pos))
    return np.float64(h >> np.uint64(11)) * (2.0**-53)


@numba.njit(inline="always", cache=True)
def child_seed_nb(seed: np.uint64, side: int) -> np.uint64:
    if side == 0:
        return hash64_nb(np.uint64(seed) ^ np.uint64(_LEFT))
    return hash64_nb(np.uint64(seed) ^ np.uint64(_RIGHT))


@numba.njit(cache=True)
def feature_table(
    seeds: np.ndarray, positions: np.ndarray, p: int, half: int, mask: int, out: np.ndarray
) -> None:
    """``out[i, j] = feature_at(seeds[i], positions[i, j], p)`` (host helper).

    The loop form of :func:`feature_at` for the grower's host side: one key
    schedule per node instead of array passes per Feistel round;
    ``(half, mask) = feistel_params(p)``.
    """
    keys = np.empty(_N_ROUNDS, dtype=np.uint64)
    for i in range(positions.shape[0]):
        round_keys_nb(seeds[i], keys)
        for j in range(positions.shape[1]):
            out[i, j] = feature_at_nb(keys, positions[i, j], p, half, mask)
