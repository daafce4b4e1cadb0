"""Random Forests and Extra-Trees on random output projections, fitted on Dask.

The forests of :mod:`gpurpo.ensemble.forest` (Joly, Geurts & Wehenkel 2014,
Algorithms 1 and 2; Breiman 2001; Geurts, Ernst & Wehenkel 2006) with the
rows of ``X`` and ``y`` split over Dask workers. A forest's trees share
only the bin edges, the projection plan and the growth parameters; each
tree adds its own seeds, drawn up front from ``random_state``
(:mod:`gpurpo.ensemble.forest.growth`). So the fit is:

1. the rows the bin edges are fitted on are drawn on the client exactly as
   :class:`gpurpo.tree.BinMapper` draws them (all rows up to its subsample
   of 200,000), gathered from every partition and fitted in one task: one
   set of edges for every tree, the single-machine edges;
2. the projection plan and every tree's seeds are drawn on the client from
   the same generator, in the single-machine order;
3. ranges of trees are grown by tasks, several per worker (a lost worker
   costs its unfinished ranges only, which Dask runs again elsewhere):

   * ``data="replicate"``: every block of ``X`` is binned where it lies,
     the uint8 codes and the outputs are stacked once and copied to every
     worker, and the ranges are groups of the single-machine batches of
     trees (smaller batches when there are fewer batches than ranges: a
     tree does not depend on its batch): the forest is the single-machine
     forest, tree for tree;
   * ``data="local"``: the workers' blocks stay where they are; each
     worker grows its share of the trees (their seeds still from
     ``random_state``) on its own rows, binned with the shared edges, and
     only fitted trees move (as cuML's distributed forests do).

:meth:`to_local` gives the fitted :mod:`gpurpo.ensemble` forest; predictions
on Dask arrays run per block of rows with that forest copied once to every
worker.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import dask
import dask.array as da
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone, is_classifier
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_is_fitted

from gpurpo._input_features import check_n_features
from gpurpo._validation import check_choice
from gpurpo.backend import namespace_of, resolve_backend
from gpurpo.dask import _forest_tasks as tasks
from gpurpo.dask._cluster import Cluster
from gpurpo.dask._forest_fit import DistributedFit, static_task
from gpurpo.dask._inputs import check_rows_chunked, check_same_row_chunks
from gpurpo.dask._params import CLIENT, init_with
from gpurpo.ensemble import forest
from gpurpo.ensemble.forest.base import BaseForest

__all__ = [
    "DATA_MODES",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]

DATA_MODES = ("replicate", "local")


def _is_sparse_meta(a: da.Array) -> bool:
    meta = getattr(a, "_meta", None)
    return meta is not None and hasattr(meta, "tocsr")


class _DaskForest(BaseEstimator):
    """Fit and prediction of the four Dask forests over a :mod:`gpurpo.ensemble` forest."""

    _local_class: type[BaseForest]

    # ---------------------------------------------------------------- helpers

    def _local_estimator(self) -> BaseForest:
        params = self.get_params(deep=False)
        for name in ("client", "data"):
            params.pop(name)
        return self._local_class(**params)

    def __getattr__(self, name: str) -> Any:
        # fitted attributes (``n_outputs_``, ``classes_``, ``estimators_``, ...) are the
        # local forest's
        if name.endswith("_") and not name.startswith("__"):
            fitted = self.__dict__.get("forest_")
            if fitted is not None:
                return getattr(fitted, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __sklearn_clone__(self) -> Any:
        # the clone shares the client (a connection, which cannot be copied)
        params = {name: value if name == "client" else clone(value, safe=False)
                  for name, value in self.get_params(deep=False).items()}
        return type(self)(**params)

    def __getstate__(self) -> dict:
        # a Client does not pickle; nor does the copy of the forest on the workers
        state = dict(super().__getstate__())
        state["client"] = None
        state.pop("_shared", None)
        return state

    def to_local(self) -> BaseForest:
        """The fitted forest as an ordinary :mod:`gpurpo.ensemble` estimator.

        Returns
        -------
        RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor or ExtraTreesClassifier
            Of :mod:`gpurpo.ensemble`, with this estimator's parameters (but
            ``client`` and ``data``); it predicts, pickles and warm-starts
            without Dask. Fitting this estimator again makes a new one.
        """
        check_is_fitted(self, "forest_")
        return self.forest_

    def _sample_weight(self, sample_weight: Any, X: da.Array) -> Any:
        if isinstance(sample_weight, da.Array):
            sample_weight = check_rows_chunked(sample_weight, "sample_weight", (1,))
            if sample_weight.shape[0] != X.shape[0]:
                raise ValueError(
                    f"sample_weight must have shape (n_samples,) = ({X.shape[0]},), got "
                    f"{sample_weight.shape}"
                )
        return sample_weight

    # -------------------------------------------------------------------- fit

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> Any:
        """Grow the forest on the rows of ``X`` and ``y`` held by the Dask workers.

        Parameters
        ----------
        X : dask.array.Array (n, p), chunked by rows only
            Inputs; each chunk a NumPy array or SciPy sparse matrix (CuPy /
            cupyx chunks go to the CUDA backend); NaN marks missing values.
        y : dask.array.Array (n,) or (n, d), chunked by rows as ``X``
            Outputs, as the :mod:`gpurpo.ensemble` estimator takes them.
        sample_weight : array (n,) or dask.array.Array (n,), optional
            Non-negative weights, as the :mod:`gpurpo.ensemble` estimator
            takes them (gathered on the client: n floats).

        Returns
        -------
        self

        Raises
        ------
        TypeError
            If ``X`` or ``y`` is not a Dask array.
        ValueError
            If ``X`` or ``y`` has the wrong number of dimensions, unknown or
            column chunks, complex values, row chunks that differ; if
            ``data`` is unknown; with ``warm_start`` or ``oob_score`` (fit the
            local forest of :meth:`to_local` for those). Errors of the values
            themselves come from the tasks, as the local estimator raises them.
        """
        check_choice(self.data, "data", DATA_MODES)
        X = check_rows_chunked(X, "X", (2,))
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        classifier = is_classifier(self)
        y = check_rows_chunked(y, "y", (1, 2), numeric=not classifier)
        check_same_row_chunks(X, "y", y)
        sample_weight = self._sample_weight(sample_weight, X)
        n, p = (int(s) for s in X.shape)
        if p < 1:
            raise ValueError(f"X has 0 feature(s) (shape={(n, p)}) while a minimum of 1 is required.")
        local = self._local_estimator()
        params = local.validated_params(n, p)
        if local.warm_start:
            raise ValueError(
                "warm_start=True is not supported on Dask; grow more trees on the local "
                "forest of to_local() (it warm-starts on in-memory data)"
            )
        if local.oob_score is not False:
            raise ValueError(
                f"oob_score={local.oob_score!r} is not supported on Dask (each tree would need "
                "every row); score a held-out set"
            )
        if classifier and y.ndim == 2 and y.shape[1] == 1 and not _is_sparse_meta(y):
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is treated as "
                "single-label classes (ravelled).", DataConversionWarning, stacklevel=2,
            )
            y = y.reshape(-1)
        cluster = Cluster(self.client)
        if sample_weight is not None:
            if isinstance(sample_weight, da.Array):
                (sample_weight,) = cluster.compute(sample_weight)
            sample_weight = local.check_sample_weight(sample_weight, n)
        backend = resolve_backend(X._meta, y._meta, device=self.device)
        fit = DistributedFit(self, local, params, cluster, backend, X, y, sample_weight)
        self.forest_ = fit.run()
        self.__dict__.pop("_shared", None)
        return self

    # ------------------------------------------------------------- prediction

    def _shared_forest(self, cluster: Cluster) -> Any:
        """The fitted forest as a task argument, copied to every worker once per client."""
        if cluster.client is None:
            return static_task(self.forest_)
        shared = self.__dict__.get("_shared")
        if shared is None or shared[0] is not cluster.client or shared[1].status != "finished":
            future = cluster.client.scatter(self.forest_, broadcast=True, hash=False)
            shared = (cluster.client, future)
            self._shared = shared
        return shared[1]

    def _predict(self, method: str, X: Any, **kwargs: Any) -> Any:
        """``method`` of the local forest: directly on in-memory ``X``, per block of rows
        on a Dask array (a Dask array, or a tuple of them, split into ``X``'s row chunks)."""
        model = self.to_local()
        if not isinstance(X, da.Array):
            return getattr(model, method)(X, **kwargs)
        X = check_rows_chunked(X, "X", (2,))
        check_n_features(model, int(X.shape[1]), reset=False)
        # the types, dtypes and widths of the results, from one row of the blocks' kind
        # (CuPy blocks give CuPy results)
        probe = getattr(model, method)(
            namespace_of(getattr(X, "_meta", None)).zeros((1, int(X.shape[1]))), **kwargs)
        shared = self._shared_forest(Cluster(self.client))
        blocks = [
            dask.delayed(tasks.predict_block, pure=True)(shared, method, block, **kwargs)
            for block in X.to_delayed().ravel()
        ]

        def stacked(part: Any, example: Any) -> da.Array:
            return da.concatenate([
                da.from_delayed(part(block), shape=(rows, *example.shape[1:]),
                                dtype=example.dtype, meta=example[:0])
                for block, rows in zip(blocks, X.chunks[0])
            ], axis=0)

        if isinstance(probe, tuple):
            return tuple(stacked(lambda b, i=i: b[i], probe[i]) for i in range(len(probe)))
        return stacked(lambda b: b, probe)

    def predict(self, X: Any) -> Any:
        """The local forest's ``predict``, per block of rows of a Dask ``X``.

        Parameters
        ----------
        X : dask.array.Array (n, p) chunked by rows, or an in-memory array

        Returns
        -------
        dask.array.Array with ``X``'s row chunks (in-memory results for in-memory ``X``)
        """
        return self._predict("predict", X)

    def predict_top_k(self, X: Any, k: int = 5) -> tuple[Any, Any]:
        """The local forest's ``predict_top_k``, per block of rows of a Dask ``X``.

        Parameters
        ----------
        X : dask.array.Array (n, p) chunked by rows, or an in-memory array
        k : int, default=5

        Returns
        -------
        indices, scores : dask.array.Array (n, k) with ``X``'s row chunks
            (in-memory results for in-memory ``X``)
        """
        return self._predict("predict_top_k", X, k=k)


#: ``data``: how the rows reach the trees
DATA = inspect.Parameter("data", inspect.Parameter.KEYWORD_ONLY, default="replicate",
                         annotation="str")


_DASK_PARAMETERS = """    client : distributed.Client or None, default=None
        Where the tasks run; None: the current client
        (``distributed.default_client()``), or Dask's default scheduler when
        there is none.
    data : {"replicate", "local"}, default="replicate"
        ``"replicate"``: the binned ``X`` and the outputs are copied to every
        worker and the forest is the :mod:`gpurpo.ensemble` forest of the same
        ``random_state``, tree for tree. ``"local"``: each worker grows its
        share of the trees on the rows it holds; only fitted trees move.
        ``warm_start`` and ``oob_score`` are not supported (use the forest of
        :meth:`to_local`).

    Attributes
    ----------
    forest_ : gpurpo.ensemble forest
        The fitted local forest (:meth:`to_local`); its fitted attributes
        (``estimators_``, ``n_outputs_``, ``classes_``, ...) are this
        estimator's.
"""


def _doc(local_class: type[BaseForest]) -> str:
    summary, rest = local_class.__doc__.split("\n", 1)
    head, attributes = rest.split("\n    Attributes\n    ----------\n", 1)
    return (
        f"{summary.rstrip('.')}, fitted on Dask arrays split by rows.\n"
        f"\n    The estimator of :mod:`gpurpo.ensemble` with the same name, fitted\n"
        f"    by tasks on a Dask cluster (:mod:`gpurpo.dask`).\n{head}"
        f"{_DASK_PARAMETERS}{attributes}"
    )


class RandomForestRegressor(RegressorMixin, _DaskForest):
    _local_class = forest.RandomForestRegressor
    __init__ = init_with(forest.RandomForestRegressor, CLIENT, DATA)


class ExtraTreesRegressor(RegressorMixin, _DaskForest):
    _local_class = forest.ExtraTreesRegressor
    __init__ = init_with(forest.ExtraTreesRegressor, CLIENT, DATA)


class _DaskClassifier(ClassifierMixin, _DaskForest):
    def predict_proba(self, X: Any) -> Any:
        """The local forest's ``predict_proba``, per block of rows of a Dask ``X``.

        Parameters
        ----------
        X : dask.array.Array (n, p) chunked by rows, or an in-memory array

        Returns
        -------
        dask.array.Array (n, d) or (n, n_classes) with ``X``'s row chunks
            (in-memory results for in-memory ``X``)
        """
        return self._predict("predict_proba", X)


class RandomForestClassifier(_DaskClassifier):
    _local_class = forest.RandomForestClassifier
    __init__ = init_with(forest.RandomForestClassifier, CLIENT, DATA)


class ExtraTreesClassifier(_DaskClassifier):
    _local_class = forest.ExtraTreesClassifier
    __init__ = init_with(forest.ExtraTreesClassifier, CLIENT, DATA)


for _cls in (RandomForestRegressor, ExtraTreesRegressor, RandomForestClassifier,
             ExtraTreesClassifier):
    _cls.__doc__ = _doc(_cls._local_class)
