"""CPU emulation of the CUDA execution model, for running ``kernels/*.cu`` without a GPU.

The very same CUDA C source that ``cupy.RawModule`` compiles with NVRTC is
compiled here as C++20 (g++) against ``emulator.h``, which supplies the CUDA
built-ins; each launch runs the threads of a block concurrently as real
threads, with ``__syncthreads`` as a real barrier, ``__shared__`` memory per
block and atomics through ``std::atomic_ref``. The Python side mirrors CuPy::

    mod = EmulatedModule(code=source, name="histogram.cu", options=("-DBINS=256",))
    kernel = mod.get_function("build_histograms")
    kernel((n_blocks,), (256,), (x_binned, rows, np.int32(n), hist), shared_mem=nbytes)

with NumPy arrays standing for device arrays, and checks every argument
against the kernel's C++ signature (see :mod:`gpurpo.testing.cuda_emulator._launch`).
"""

from gpurpo.testing.cuda_emulator._build import (
    EmulatorCompileError,
    EmulatorUnavailableError,
    cache_dir,
)
from gpurpo.testing.cuda_emulator._launch import CudaKernelError, EmulatedKernel, Param
from gpurpo.testing.cuda_emulator._module import EmulatedModule, raw_kernel

__all__ = [
    "CudaKernelError",
    "EmulatedKernel",
    "EmulatedModule",
    "EmulatorCompileError",
    "EmulatorUnavailableError",
    "Param",
    "cache_dir",
    "raw_kernel",
]
