"""The ``__init__`` of a Dask estimator: its local namesake's parameters plus its own."""

from __future__ import annotations

import inspect
from typing import Any

#: ``client``: where the tasks run (None: the current client)
CLIENT = inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY, default=None,
                           annotation="Any")


def init_with(local_class: type, *extra: inspect.Parameter) -> Any:
    """An ``__init__`` taking the parameters of ``local_class`` followed by ``extra``.

    Its signature (read by scikit-learn's ``get_params``) lists every
    parameter by name with the local estimator's defaults; the values are
    stored untouched, as scikit-learn requires.
    """
    base = inspect.signature(local_class.__init__)
    signature = base.replace(parameters=[*base.parameters.values(), *extra])

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name, value in list(bound.arguments.items())[1:]:
            setattr(self, name, value)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    return __init__
