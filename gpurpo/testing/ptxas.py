"""Register use, spills and shared memory of each kernel, from ptxas, without a GPU.

NVRTC (:mod:`gpurpo.testing.nvrtc`) turns a CUDA source into PTX; ``ptxas``,
the assembler that the driver runs when CuPy loads that PTX on a device,
allocates registers and reports, for every kernel, its registers per thread,
its stack frame, the bytes it spills to local memory and its static shared
memory. A kernel that spills reads and writes per-thread local memory (device
memory behind the L1 cache) in its inner loop, and a kernel whose registers
times its block size exceed the multiprocessor's register file cannot be
launched at all ("too many resources requested"): both are found here on a
machine without a GPU.

``ptxas`` comes from the ``nvidia-cuda-nvcc-cu12`` wheel (or ``PATH``). Its
version must be at least NVRTC's, since PTX names the ISA version it needs.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "KernelResources",
    "PtxasUnavailableError",
    "kernel_resources",
    "ptxas_path",
]

REGISTERS_PER_MULTIPROCESSOR = 65536
"""32-bit registers of one multiprocessor (compute capability 5.0 to 9.0)."""


class PtxasUnavailableError(RuntimeError):
    """Neither the ``nvidia-cuda-nvcc-cu12`` wheel nor ``PATH`` provides ``ptxas``."""


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (one ``.entry`` of the PTX).

    Attributes
    ----------
    name : str
        The kernel's name.
    registers : int
        32-bit registers per thread.
    stack_frame : int
        Bytes of per-thread stack (local memory).
    spill_stores, spill_loads : int
        Bytes of registers spilled to and reloaded from local memory.
    shared_bytes : int
        Static shared memory per block (``__shared__`` arrays of fixed size).
    """

    name: str
    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int

    @property
    def spills(self) -> bool:
        """Whether the kernel spills registers to local memory."""
        return self.spill_stores > 0 or self.spill_loads > 0

    def max_block_threads(self) -> int:
        """Most threads per block the register file allows (registers x threads <= 65,536)."""
        return REGISTERS_PER_MULTIPROCESSOR // max(1, self.registers)


def _wheel_ptxas() -> Path | None:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for name in ("ptxas", "ptxas.exe"):
            path = Path(root) / "cuda_nvcc" / "bin" / name
            if path.is_file():
                return path
    return None


@functools.lru_cache(maxsize=1)
def ptxas_path() -> Path:
    """The ``ptxas`` executable: the ``nvidia-cuda-nvcc-cu12`` wheel's, else one on ``PATH``.

    Raises
    ------
    PtxasUnavailableError
        If neither exists.
    """
    path = _wheel_ptxas()
    if path is None:
        found = shutil.which("ptxas")
        path = Path(found) if found else None
    if path is None:
        raise PtxasUnavailableError(
            "ptxas is needed for the register and spill report: pip install "
            "'nvidia-cuda-nvcc-cu12' (part of gpurpo[test])"
        )
    return path


_FUNCTION = re.compile(r"Function properties for (\S+)\s*\n\s*(\d+) bytes stack frame, "
                       r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_USAGE = re.compile(r"Compiling entry function '([^']+)'.*?Used (\d+) registers(?:[^\n]*?(\d+) bytes smem)?",
                    re.S)


def _parse(log: str) -> dict[str, KernelResources]:
    frames = {m[0]: tuple(int(v) for v in m[1:]) for m in _FUNCTION.findall(log)}
    out = {}
    for name, registers, smem in _USAGE.findall(log):
        if name not in frames:
            raise RuntimeError(f"ptxas reported registers but no function properties for {name!r}:\n{log}")
        stack, stores, loads = frames[name]
        out[name] = KernelResources(name, int(registers), stack, stores, loads, int(smem or 0))
    return out


def kernel_resources(ptx: str, gpu: str = "sm_90") -> dict[str, KernelResources]:
    """Assemble ``ptx`` for ``gpu`` with ``ptxas -v`` and read each kernel's resources.

    Parameters
    ----------
    ptx : str
        PTX text, e.g. from :func:`gpurpo.testing.nvrtc.compile_ptx`.
    gpu : str
        Real architecture, e.g. ``"sm_80"`` or ``"sm_90"``.

    Returns
    -------
    dict
        Kernel name -> :class:`KernelResources`, one per ``.entry``.

    Raises
    ------
    ValueError
        If ``gpu`` is not of the form ``sm_XY``.
    RuntimeError
        If ptxas rejects the PTX (its message is included).
    PtxasUnavailableError
        If ptxas is missing.
    """
    if not isinstance(ptx, str):
        raise TypeError(f"ptx must be a str, got {type(ptx).__name__}")
    if not re.fullmatch(r"sm_\d+[a-z]?", gpu):
        raise ValueError(f"gpu must look like 'sm_90', got {gpu!r}")
    exe = ptxas_path()
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp) / "kernels.ptx", Path(tmp) / "kernels.cubin"
        source.write_text(ptx)
        run = subprocess.run([str(exe), "-v", "--gpu-name", gpu, str(source), "-o", str(cubin)],
                             capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"ptxas ({exe}) rejected the PTX for {gpu}:\n{run.stderr.strip()}")
    return _parse(run.stdout + run.stderr)
