"""Launching emulated kernels: argument checks, launch limits, bounds guards.

:class:`EmulatedKernel` is called exactly like ``cupy.RawKernel``::

    kernel(grid, block, args, shared_mem=0)

``args`` holds NumPy arrays where the CUDA kernel takes device pointers and
scalars where it takes values. Every argument is checked against the
kernel's C++ parameter types (reported by the compiler, not guessed from the
text), following the rules by which CuPy hands arguments to the driver, so a
call that would read the wrong bytes on a GPU fails here with a TypeError:

* a pointer parameter takes a C-contiguous, aligned, native-byte-order array
  whose dtype is the pointee type (``const float*`` -> float32,
  ``unsigned char*`` -> uint8, ``int*`` -> int32, ``long long*`` -> int64,
  ``double*`` -> float64, ``bool*`` -> bool; ``void*`` takes any array); a
  non-const pointer also needs a writeable array;
* a NumPy scalar is passed by CuPy with its own dtype, unconverted: it must
  be exactly the parameter's type (``np.float32`` for ``float``, ...);
* a Python ``int`` is passed by CuPy as a 64-bit integer, which a GPU reads
  correctly for any integer parameter whose range holds the value (checked);
  a Python ``float`` is passed as ``double`` and only fits ``double``
  parameters; a Python ``bool`` only fits ``bool``.

With ``check_bounds`` (the default) every array is handed to the kernel as a
copy framed by 4 KiB guard zones of known bytes; a write outside an
argument's memory changes a guard zone and raises :class:`CudaKernelError`
instead of silently corrupting the process.

Every launch counts in the open :func:`gpurpo.backend.count_device_activity`
blocks, as a ``cupy.RawKernel`` launch does there.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurpo.backend import record_device_activity

__all__ = ["CudaKernelError", "EmulatedKernel", "Param", "parse_signature"]

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
GUARD_BYTES = 4096
_ABANDONED: list[Any] = []
_GUARD_PATTERN = np.random.default_rng(20261125).integers(0, 256, GUARD_BYTES, dtype=np.uint8)


class CudaKernelError(RuntimeError):
    """A kernel failed while running in the emulator.

    Raised for ``__trap()``, a failed device ``assert``, barrier divergence,
    unsupported warp masks, shared memory over the limit, a write outside an
    argument array, or a launch that does not finish within the timeout.
    """


@dataclass(frozen=True)
class Param:
    """One kernel parameter, as the compiler sees it.

    Attributes
    ----------
    name, decl : str
        Name and declaration as written in the source.
    pointer : bool
        True for a pointer parameter.
    const : bool
        For pointers: the pointee is ``const``.
    kind : str
        ``"b"`` bool, ``"i"`` signed integer, ``"u"`` unsigned integer,
        ``"f"`` floating point, ``"v"`` void, ``"o"`` other (struct),
        ``"x"`` not supported by the emulator.
    size : int
        Size in bytes of the value (scalars) or of the pointee (pointers).
    """

    name: str
    decl: str
    pointer: bool
    const: bool
    kind: str
    size: int

    @property
    def dtype(self) -> np.dtype | None:
        """The NumPy dtype of the value or pointee (None if there is none)."""
        if self.kind == "b" and self.size == 1:
            return np.dtype(np.bool_)
        if self.kind in "iu" and self.size in (1, 2, 4, 8):
            return np.dtype(f"{self.kind}{self.size}")
        if self.kind == "f" and self.size in (2, 4, 8):
            return np.dtype(f"f{self.size}")
        return None


def parse_signature(codes: str, names: Sequence[str], decls: Sequence[str]) -> tuple[Param, ...]:
    """Decode the type codes written by ``gpurpo_emu::signature_of``."""
    params = []
    for i, code in enumerate(c for c in codes.split(";") if c):
        name = names[i] if i < len(names) else f"arg{i}"
        decl = decls[i] if i < len(decls) else "?"
        if code[0] == "p":
            params.append(Param(name, decl, True, code[1] == "c", code[2], int(code[3:])))
        elif code[0] == "s":
            params.append(Param(name, decl, False, False, code[1], int(code[2:])))
        else:
            params.append(Param(name, decl, False, False, "x", 0))
    return tuple(params)


def _dims(value: Any, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        value = (value,)
    if not isinstance(value, tuple) or not 1 <= len(value) <= 3:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = []
    for v in value:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
        dims.append(int(v))
    dims += [1] * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if not 1 <= d <= lim:
            raise ValueError(
                f"{what} dimension {'xyz'[axis]} must be in [1, {lim}], got {d} (from {value!r})"
            )
    return dims[0], dims[1], dims[2]


class _Guards:
    """Guarded copies of the array arguments of one launch."""

    def __init__(self, arrays: list[tuple[int, np.ndarray, Param]]):
        self.regions: list[dict[str, Any]] = []
        self.pointer: dict[int, int] = {}
        spans = sorted(
            ((a.ctypes.data, a.ctypes.data + a.nbytes, i, a, p) for i, a, p in arrays),
            key=lambda s: (s[0], s[1]),
        )
        for start, end, i, a, p in spans:
            if (
                self.regions
                and a.nbytes > 0
                and self.regions[-1]["end"] > start
                and self.regions[-1]["size"] > 0
            ):
                region = self.regions[-1]
                region["end"] = max(region["end"], end)
            else:
                region = {"start": start, "end": end, "members": []}
                self.regions.append(region)
            region["size"] = region["end"] - region["start"]
            region["members"].append((i, a, p, start, end))
        for region in self.regions:
            size = region["end"] - region["start"]
            buf = np.empty(2 * GUARD_BYTES + size, dtype=np.uint8)
            buf[:GUARD_BYTES] = _GUARD_PATTERN
            buf[GUARD_BYTES + size :] = _GUARD_PATTERN
            if size:
                buf[GUARD_BYTES : GUARD_BYTES + size] = _raw(region["start"], size)
            region["buf"] = buf
            base = buf.ctypes.data + GUARD_BYTES
            for i, _a, _p, start, _end in region["members"]:
                self.pointer[i] = base + (start - region["start"])

    def finish(self, kernel_name: str) -> None:
        """Copy results back; raise if a guard zone was written."""
        damaged = []
        for region in self.regions:
            size = region["end"] - region["start"]
            buf = region["buf"]
            for i, a, p, start, end in region["members"]:
                if not p.const and a.flags.writeable and end > start:
                    off = start - region["start"]
                    _raw(start, end - start)[...] = buf[GUARD_BYTES + off : GUARD_BYTES + off + end - start]
            before = np.flatnonzero(buf[:GUARD_BYTES] != _GUARD_PATTERN)
            after = np.flatnonzero(buf[GUARD_BYTES + size :] != _GUARD_PATTERN)
            if before.size or after.size:
                names = ", ".join(f"{p.name!r} ({a.dtype}, {a.size} elements)" for _, a, p, *_ in region["members"])
                parts = []
                if before.size:
                    parts.append(f"{GUARD_BYTES - int(before[0])} byte(s) before the start")
                if after.size:
                    parts.append(f"up to {int(after[-1]) + 1} byte(s) past the end")
                damaged.append(f"{' and '.join(parts)} of argument {names}")
        if damaged:
            raise CudaKernelError(
                f"kernel {kernel_name!r} wrote outside its arrays: " + "; ".join(damaged)
            )


def _raw(address: int, size: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


class EmulatedKernel:
    """A kernel of an :class:`~gpurpo.testing.cuda_emulator.EmulatedModule`.

    Call it like ``cupy.RawKernel``: ``kernel(grid, block, args, shared_mem=0)``.

    Attributes
    ----------
    name : str
        Kernel name.
    params : tuple of Param
        The parameters, with the types the compiler gave them.
    max_threads_per_block : int
        1024, as on every current NVIDIA GPU.
    max_dynamic_shared_size_bytes : int
        Dynamic shared memory a launch may request; like CuPy's attribute of
        the same name it can be raised (up to the module's opt-in limit) to
        mimic ``cudaFuncAttributeMaxDynamicSharedMemorySize``.
    """

    def __init__(self, module: Any, index: int, name: str, params: tuple[Param, ...]):
        self._module = module
        self._index = index
        self.name = name
        self.params = params
        self.max_threads_per_block = MAX_THREADS_PER_BLOCK
        self._max_dynamic = module.shared_mem_limit

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._max_dynamic

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, value: int) -> None:
        value = operator.index(value)
        limit = self._module.shared_mem_optin_limit
        if not 0 <= value <= limit:
            raise ValueError(
                f"max_dynamic_shared_size_bytes of kernel {self.name!r} must be in [0, {limit}], got {value}"
            )
        self._max_dynamic = value

    def __repr__(self) -> str:
        sig = ", ".join(p.decl for p in self.params)
        return f"<EmulatedKernel {self.name}({sig})>"

    # -- argument conversion -------------------------------------------------

    def _where(self, i: int, p: Param) -> str:
        return f"kernel {self.name!r} argument {i} ({p.name!r}, declared `{p.decl}`)"

    def _check_array(self, i: int, p: Param, a: Any) -> np.ndarray:
        where = self._where(i, p)
        want = p.dtype
        if not isinstance(a, np.ndarray):
            module = type(a).__module__ or ""
            if module.startswith("cupy"):
                raise TypeError(
                    f"{where}: the CUDA emulator takes NumPy arrays in place of device arrays, "
                    f"got {type(a).__module__}.{type(a).__name__}"
                )
            expected = f"a NumPy array of dtype {want}" if want is not None else "a NumPy array"
            raise TypeError(f"{where} is a pointer and needs {expected}, got {type(a).__name__}: {a!r:.80}")
        if p.kind == "x":
            raise TypeError(f"{where}: parameter type not supported by the CUDA emulator")
        if want is not None and a.dtype != want:
            raise TypeError(f"{where} needs a C-contiguous array of dtype {want}, got dtype {a.dtype}")
        if want is None and p.kind == "o" and p.size and a.nbytes % p.size:
            raise TypeError(
                f"{where} points to {p.size}-byte elements, but the array has {a.nbytes} bytes "
                f"(dtype {a.dtype}, shape {a.shape})"
            )
        if not a.dtype.isnative:
            raise TypeError(f"{where} needs native byte order, got dtype {a.dtype.str}")
        if not a.flags.c_contiguous:
            raise TypeError(
                f"{where} needs a C-contiguous array, got one with strides {a.strides} "
                f"(shape {a.shape}); pass np.ascontiguousarray(...)"
            )
        if not a.flags.aligned:
            raise TypeError(f"{where} needs an aligned array")
        if not p.const and not a.flags.writeable:
            raise TypeError(f"{where} is a non-const pointer but the array is read-only")
        return a

    def _scalar(self, i: int, p: Param, v: Any) -> np.ndarray:
        where = self._where(i, p)
        want = p.dtype
        if p.kind == "o":
            if isinstance(v, np.void) and v.dtype.itemsize == p.size:
                return np.frombuffer(v.tobytes(), dtype=np.uint8).copy()
            raise TypeError(f"{where} is a {p.size}-byte struct; pass a NumPy structured scalar of that size")
        if want is None:
            raise TypeError(f"{where}: parameter type not supported by the CUDA emulator")
        if isinstance(v, np.ndarray):
            raise TypeError(f"{where} is a scalar of type {want}, got an array of shape {v.shape}")
        if isinstance(v, np.generic):
            if v.dtype != want:
                raise TypeError(
                    f"{where} needs a scalar of dtype {want}, got {v.dtype}: CuPy passes NumPy scalars "
                    f"unconverted, so the kernel would read the wrong bytes; pass np.{want}(value)"
                )
            return np.array([v], dtype=want)
        if isinstance(v, bool):
            if p.kind == "b":
                return np.array([v], dtype=want)
            raise TypeError(f"{where} needs {want}, got a Python bool (CuPy passes it as a 1-byte bool)")
        if isinstance(v, int):
            if p.kind in "iu":
                info = np.iinfo(want)
                if not info.min <= v <= info.max:
                    raise ValueError(f"{where}: value {v} is out of range for {want} [{info.min}, {info.max}]")
                return np.array([v], dtype=want)
            raise TypeError(
                f"{where} needs {want}, got a Python int (CuPy passes it as a 64-bit integer); "
                f"pass np.{want}(value)"
            )
        if isinstance(v, float):
            if p.kind == "f" and p.size == 8:
                return np.array([v], dtype=want)
            raise TypeError(
                f"{where} needs {want}, got a Python float (CuPy passes it as a double); pass np.{want}(value)"
            )
        raise TypeError(f"{where} needs a scalar of dtype {want}, got {type(v).__name__}: {v!r:.80}")

    # -- launch ----------------------------------------------------------------

    def __call__(
        self,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: tuple[Any, ...] | list[Any],
        *,
        shared_mem: int = 0,
        stream: Any = None,
        enable_cooperative_groups: bool = False,
    ) -> None:
        """Launch the kernel (synchronously) on NumPy arrays.

        Parameters
        ----------
        grid, block : int or tuple of up to 3 ints
            Grid and block dimensions, as for ``cupy.RawKernel``.
        args : tuple
            Kernel arguments: NumPy arrays for pointers, scalars for values.
        shared_mem : int
            Bytes of dynamic shared memory per block.
        stream
            Accepted for compatibility and ignored (launches are synchronous).
        enable_cooperative_groups : bool
            Not supported (must be False).

        Raises
        ------
        TypeError
            Wrong argument count or an argument that does not match the C type.
        ValueError
            Launch configuration beyond what a CUDA device accepts.
        CudaKernelError
            The kernel failed while running.
        """
        if enable_cooperative_groups:
            raise NotImplementedError("the CUDA emulator does not support cooperative launches")
        g = _dims(grid, f"grid of kernel {self.name!r}", MAX_GRID_DIMS)
        b = _dims(block, f"block of kernel {self.name!r}", MAX_BLOCK_DIMS)
        nthreads = b[0] * b[1] * b[2]
        if nthreads > self.max_threads_per_block:
            raise ValueError(
                f"block {block!r} of kernel {self.name!r} has {nthreads} threads; a CUDA block holds at "
                f"most {self.max_threads_per_block}"
            )
        if isinstance(shared_mem, (bool, np.bool_)) or not isinstance(shared_mem, (int, np.integer)):
            raise TypeError(f"shared_mem of kernel {self.name!r} must be an int, got {shared_mem!r}")
        shared_mem = int(shared_mem)
        if not 0 <= shared_mem <= self._max_dynamic:
            raise ValueError(
                f"shared_mem of kernel {self.name!r} must be in [0, {self._max_dynamic}] bytes, got "
                f"{shared_mem} (raise kernel.max_dynamic_shared_size_bytes to opt in to more, up to "
                f"{self._module.shared_mem_optin_limit})"
            )
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args of kernel {self.name!r} must be a tuple, got {type(args).__name__}")
        if len(args) != len(self.params):
            sig = ", ".join(p.decl for p in self.params)
            raise TypeError(f"kernel {self.name!r}({sig}) takes {len(self.params)} arguments, got {len(args)}")

        keep: list[np.ndarray] = []
        arrays: list[tuple[int, np.ndarray, Param]] = []
        for i, (p, v) in enumerate(zip(self.params, args)):
            if p.pointer:
                arrays.append((i, self._check_array(i, p, v), p))
            else:
                if p.kind == "x":
                    raise TypeError(f"{self._where(i, p)}: parameter type not supported by the CUDA emulator")
                keep.append(self._scalar(i, p, v))
        guards = _Guards(arrays) if self._module.check_bounds else None
        pointers = np.zeros(len(self.params), dtype=np.uintp)
        slots = (ctypes.c_void_p * max(1, len(self.params)))()
        scalar_iter = iter(keep)
        by_position = {j: a for j, a, _ in arrays}
        for i, p in enumerate(self.params):
            if p.pointer:
                pointers[i] = guards.pointer[i] if guards is not None else by_position[i].ctypes.data
                slots[i] = pointers.ctypes.data + i * pointers.itemsize
            else:
                slots[i] = next(scalar_iter).ctypes.data
        limit = max(self._module.shared_mem_limit, self._max_dynamic)
        err = ctypes.create_string_buffer(4096)
        rc = self._module._launch(
            self._index,
            slots,
            (ctypes.c_uint * 3)(*g),
            (ctypes.c_uint * 3)(*b),
            shared_mem,
            limit,
            self._module.concurrent_blocks,
            float(self._module.timeout),
            err,
            len(err),
        )
        message = err.value.decode(errors="replace")
        if rc == 3:
            # threads stuck in the kernel keep pointers into these buffers
            _ABANDONED.append((guards, keep, pointers, slots, args))
            raise CudaKernelError(f"kernel {self.name!r}: {message}")
        if guards is not None:
            guards.finish(self.name)
        if rc == 1:
            raise CudaKernelError(f"kernel {self.name!r} failed: {message}")
        if rc != 0:
            raise CudaKernelError(f"kernel {self.name!r} could not be launched: {message}")
        # one launch for open gpurpo.backend.count_device_activity blocks
        record_device_activity(launches=1)
