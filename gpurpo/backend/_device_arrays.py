"""Counting array namespaces: what a device run launches and copies, seen from ``xp``.

Inside a :func:`~gpurpo.backend.count_device_activity` block, a device
backend's ``xp`` is a :class:`CountingNamespace` over its array module. On
the emulated backend its results are :class:`DeviceArray` objects, NumPy
arrays that count every operation a CuPy array would run as a kernel, and
every conversion that would copy to the host; on CuPy the namespace counts
its own function calls only (CuPy arrays cannot be watched from Python).
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gpurpo.backend._activity import record_d2h, record_device_activity, record_h2d

__all__ = ["CountingNamespace", "DeviceArray", "device_asarray", "refuse_host_operands"]

#: functions that start no kernel: allocation without fill, views, metadata
NO_LAUNCH = frozenset({
    "empty", "empty_like", "broadcast_to", "broadcast_arrays", "broadcast_shapes", "reshape",
    "expand_dims", "squeeze", "transpose", "swapaxes", "moveaxis", "rollaxis", "atleast_1d",
    "atleast_2d", "atleast_3d", "split", "array_split", "hsplit", "vsplit", "real", "imag",
    "result_type", "can_cast", "promote_types", "min_scalar_type", "ndim", "shape", "size",
    "isscalar", "issubdtype", "may_share_memory", "shares_memory", "get_array_module",
})
#: functions whose output size depends on the data: the device reads a count back
DATA_DEPENDENT = frozenset({
    "nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract", "bincount",
})
#: functions taking host data to the device
TRANSFERS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
#: submodules whose functions are counted like the top-level ones
SUBMODULES = ("linalg", "fft")
#: bytes of the count read back by a data-dependent operation
COUNT_BYTES = 8


def _is_host_array(a: Any) -> bool:
    return type(a) is np.ndarray


class _Host:
    """Host arrays met while unwrapping the arguments of one device operation."""

    __slots__ = ("count", "nbytes")

    def __init__(self) -> None:
        self.count = 0
        self.nbytes = 0


def _unwrap(value: Any, host: _Host) -> Any:
    """``value`` with device arrays as plain NumPy views; host arrays are tallied."""
    if isinstance(value, DeviceArray):
        return value.view(np.ndarray)
    if _is_host_array(value):
        host.count += 1
        host.nbytes += value.nbytes
        return value
    if isinstance(value, tuple):
        return tuple(_unwrap(v, host) for v in value)
    if isinstance(value, list):
        return [_unwrap(v, host) for v in value]
    return value


def _host_arrays(value: Any) -> list[np.ndarray]:
    """The host arrays in ``value`` (nested tuples, lists and dicts of arguments)."""
    if _is_host_array(value):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _host_arrays(v)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _host_arrays(v)]
    return []


def _wrap(value: Any) -> Any:
    """NumPy results as device arrays (scalars as 0-d arrays, as CuPy returns them)."""
    if isinstance(value, np.ndarray):
        return value.view(DeviceArray)
    if isinstance(value, np.generic):
        return np.asarray(value).view(DeviceArray)
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _launches(name: str, result: Any, args: tuple[Any, ...] = ()) -> int:
    """Kernels of one operation: none for metadata functions, empty results and a
    conversion that returns its input itself (``ascontiguousarray`` of a contiguous
    array of its dtype: CuPy skips the launch), else one."""
    if name in NO_LAUNCH:
        return 0
    if name in TRANSFERS and any(result is a for a in args):
        return 0
    arrays = result if isinstance(result, (tuple, list)) else (result,)
    sizes = [a.size for a in arrays if hasattr(a, "size") and hasattr(a, "dtype")]
    return int(not sizes or any(sizes))


#: whether device operations refuse host arrays among their operands, as CuPy's do
#: (:func:`refuse_host_operands`)
_REFUSE_HOST = contextvars.ContextVar("refuse_host_operands", default=False)


@contextlib.contextmanager
def refuse_host_operands() -> Iterator[None]:
    """Inside the block, a device operation given a NumPy array of one or more dimensions
    among its operands raises ``TypeError``, as CuPy's functions and operators do, where
    the emulated device otherwise counts it as a copy to the device.

    For tests that run the CUDA path on the CPU: host data must reach the device
    through ``Backend.asarray`` or ``xp.asarray``. Indexing with a host array and
    assigning one stay allowed (CuPy copies them).
    """
    token = _REFUSE_HOST.set(True)
    try:
        yield
    finally:
        _REFUSE_HOST.reset(token)


def _device_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 name: str) -> Any:
    """Run a NumPy function as a device operation: count it, return device arrays."""
    host = _Host()
    plain_args = _unwrap(args, host)
    plain_kwargs = {k: _unwrap(v, host) for k, v in kwargs.items()}
    if host.count and _REFUSE_HOST.get() and name not in TRANSFERS:
        shapes = [a.shape for a in _host_arrays((args, kwargs)) if a.ndim]
        if shapes:
            raise TypeError(f"{name}: NumPy array(s) of shape {shapes} among the operands of a "
                            "device operation; CuPy refuses them (move them with "
                            "Backend.asarray)")
    result = fn(*plain_args, **plain_kwargs)
    dependent = name in DATA_DEPENDENT or (name == "where" and len(args) == 1)
    record_device_activity(
        launches=_launches(name, result, plain_args),
        h2d=host.count,
        h2d_bytes=host.nbytes,
        d2h=int(dependent),
        syncs=int(dependent),
        d2h_bytes=COUNT_BYTES if dependent else 0,
    )
    return _wrap(result)


def device_asarray(a: Any, dtype: Any = None) -> DeviceArray:
    """``a`` as a device array: host data are copied over, device data converted there.

    Parameters
    ----------
    a : array_like
        Host data (NumPy array, scalar, nested sequence) or a :class:`DeviceArray`.
    dtype : dtype, optional
        Element type of the result.

    Returns
    -------
    DeviceArray
        A view of ``a`` where no conversion is needed (as ``numpy.asarray``).
    """
    if isinstance(a, DeviceArray):
        plain = a.view(np.ndarray)
        out = np.asarray(plain, dtype=dtype)
        if out.size and not np.may_share_memory(out, plain):
            record_device_activity(launches=1)
        return out.view(DeviceArray)
    out = np.asarray(a, dtype=dtype)
    record_h2d(out.nbytes)
    return out.view(DeviceArray)


def _transfer(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``xp.asarray`` and friends: a copy for host data, a conversion for device data."""

    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(a, DeviceArray):
            plain = a.view(np.ndarray)
            out = fn(plain, *args, **kwargs)
            if name == "array" or (out.size and not np.may_share_memory(out, plain)):
                record_device_activity(launches=1)
            return _wrap(out)
        out = np.asarray(fn(a, *args, **kwargs))
        record_h2d(out.nbytes)
        return out.view(DeviceArray)

    call.__name__ = name
    call.__doc__ = fn.__doc__
    return call


def _scalar_conversion(method: Callable[..., Any]) -> Callable[..., Any]:
    def convert(self: DeviceArray, *args: Any) -> Any:
        plain = self.view(np.ndarray)
        record_d2h(plain.nbytes)
        return method(plain, *args)

    convert.__name__ = method.__name__
    return convert


def _launching(name: str) -> Callable[..., Any]:
    method = getattr(np.ndarray, name)

    def launch(self: DeviceArray, *args: Any, **kwargs: Any) -> Any:
        return _device_call(method, (self, *args), kwargs, name)

    launch.__name__ = name
    launch.__doc__ = method.__doc__
    return launch


def _is_basic_key(key: Any) -> bool:
    """Whether indexing with ``key`` is a view (ints, slices, ``...``, ``None``)."""
    for k in key if isinstance(key, tuple) else (key,):
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            continue
        return False
    return True


def _has_mask(key: Any) -> bool:
    for k in key if isinstance(key, tuple) else (key,):
        if isinstance(k, (bool, np.bool_)):
            return True
        if isinstance(k, np.ndarray) and k.dtype == np.bool_:
            return True
    return False


class DeviceArray(np.ndarray):
    """A NumPy array standing for a CuPy array on the emulated backend.

    It behaves as the NumPy array it is, and reports to the open
    :func:`~gpurpo.backend.count_device_activity` blocks what CuPy would do:
    a launch per ufunc (operators included), per NumPy function called on
    it, per fancy-index get, per ``__setitem__`` and per computing method;
    a device-to-host copy and a sync per scalar conversion and ``.get()``.
    Basic indexing gives views, and a full integer index a 0-d array, as on
    CuPy.
    """

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        outs = kwargs.get("out")
        result = _device_call(getattr(ufunc, method), inputs, kwargs, ufunc.__name__)
        if outs is not None and method != "at":
            # in-place forms (``a += b``) hand back the very objects given as ``out``
            return outs[0] if len(outs) == 1 else outs
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _device_call(func, args, kwargs, func.__name__)

    def __getitem__(self, key: Any) -> Any:
        plain = self.view(np.ndarray)
        if _is_basic_key(key):
            out = plain[key]
            if not isinstance(out, np.ndarray):
                # an element: CuPy gives a 0-d view, read only on conversion
                out = plain[(*key, ...) if isinstance(key, tuple) else (key, ...)]
            return out.view(DeviceArray)
        host = _Host()
        plain_key = _unwrap(key, host)
        out = plain[plain_key]
        mask = _has_mask(plain_key)
        record_device_activity(launches=int(out.size > 0), h2d=host.count, h2d_bytes=host.nbytes,
                               d2h=int(mask), syncs=int(mask), d2h_bytes=COUNT_BYTES if mask else 0)
        return _wrap(out)

    def __setitem__(self, key: Any, value: Any) -> None:
        host = _Host()
        plain_key = _unwrap(key, host)
        plain_value = _unwrap(value, host)
        plain = self.view(np.ndarray)
        plain[plain_key] = plain_value
        record_device_activity(launches=int(plain.size > 0), h2d=host.count, h2d_bytes=host.nbytes)

    def get(self) -> np.ndarray:
        """A host copy (``cupy.ndarray.get``): one device-to-host copy and sync."""
        plain = self.view(np.ndarray)
        record_d2h(plain.nbytes)
        return plain.copy()

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe",
               subok: bool = True, copy: bool = True) -> Any:
        """``ndarray.astype``, a launch unless it returns the array itself."""
        plain = self.view(np.ndarray)
        out = plain.astype(dtype, order=order, casting=casting, copy=copy)
        if out is plain:
            return self
        record_device_activity(launches=int(out.size > 0))
        return out.view(DeviceArray)

    def ravel(self, order: str = "C") -> Any:
        """``ndarray.ravel``: a view when the layout allows, else a copy (a launch)."""
        plain = self.view(np.ndarray)
        out = plain.ravel(order)
        if not np.may_share_memory(out, plain) and out.size:
            record_device_activity(launches=1)
        return out.view(DeviceArray)

    __int__ = _scalar_conversion(np.ndarray.__int__)
    __float__ = _scalar_conversion(np.ndarray.__float__)
    __complex__ = _scalar_conversion(np.ndarray.__complex__)
    __bool__ = _scalar_conversion(np.ndarray.__bool__)
    __index__ = _scalar_conversion(np.ndarray.__index__)
    item = _scalar_conversion(np.ndarray.item)
    tolist = _scalar_conversion(np.ndarray.tolist)


#: array methods that run a kernel on CuPy (those through ufuncs included: computed on
#: the plain array, so that each call counts once)
LAUNCHING_METHODS = (
    "all", "any", "argmax", "argmin", "argpartition", "argsort", "choose", "clip", "compress",
    "conj", "copy", "cumprod", "cumsum", "dot", "fill", "flatten", "max", "mean", "min",
    "nonzero", "partition", "prod", "put", "repeat", "round", "searchsorted", "sort", "std",
    "sum", "take", "trace", "var",
)
for _name in LAUNCHING_METHODS:
    setattr(DeviceArray, _name, _launching(_name))
del _name


class _CountingFunction:
    """A function of an array module that counts one launch per call."""

    __slots__ = ("_fn", "_name", "_device")

    def __init__(self, fn: Any, name: str, device: bool):
        self._fn = fn
        self._name = name
        self._device = device

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._device:
            return _device_call(self._fn, args, kwargs, self._name)
        result = self._fn(*args, **kwargs)
        dependent = self._name in DATA_DEPENDENT
        record_device_activity(launches=_launches(self._name, result), syncs=int(dependent),
                               d2h=int(dependent), d2h_bytes=COUNT_BYTES if dependent else 0)
        return result

    def __getattr__(self, name: str) -> Any:
        # ufunc methods (``xp.add.at``, ``xp.maximum.reduce``) count like the ufunc
        attr = getattr(self._fn, name)
        if callable(attr) and not isinstance(attr, type):
            return _CountingFunction(attr, name, self._device)
        return attr

    def __repr__(self) -> str:
        return f"<counted {self._fn!r}>"


class CountingNamespace:
    """An array module (``numpy`` or ``cupy``) whose functions count device activity.

    Parameters
    ----------
    module : module
        The array module.
    device_arrays : bool
        True for NumPy standing for a device (the emulated backend): results
        are :class:`DeviceArray` objects and ``asarray`` of host data counts
        a copy. False for CuPy, whose own arrays are returned; ``asarray`` of
        host (NumPy) data counts a copy.
    """

    def __init__(self, module: types.ModuleType, device_arrays: bool):
        self._module = module
        self._device = bool(device_arrays)
        self.__name__ = module.__name__

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            if name in SUBMODULES:
                attr = CountingNamespace(attr, self._device)
        elif isinstance(attr, type) or not callable(attr):
            pass
        elif name in TRANSFERS:
            attr = _transfer(name, attr) if self._device else _host_transfer(name, attr)
        elif isinstance(attr, np.ufunc):
            # NumPy ufuncs on device arrays are counted by DeviceArray.__array_ufunc__
            pass
        else:
            attr = _CountingFunction(attr, name, self._device)
        # cached: later look-ups skip __getattr__
        self.__dict__[name] = attr
        return attr

    def __repr__(self) -> str:
        return f"<counting namespace over {self._module.__name__}>"


def _host_transfer(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """CuPy's ``asarray`` and friends: a copy when the data are on the host."""
    from gpurpo.backend._activity import nbytes_of
    from gpurpo.backend._cupy import is_gpu_array

    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = fn(a, *args, **kwargs)
        if is_gpu_array(a):
            if name == "array" or out is not a:
                record_device_activity(launches=1)
        else:
            record_h2d(nbytes_of(out))
        return out

    call.__name__ = name
    call.__doc__ = fn.__doc__
    return call

