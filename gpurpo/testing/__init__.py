"""Checks of the CUDA kernels that run without a GPU (test-only machinery).

* :mod:`gpurpo.testing.nvrtc` compiles every ``kernels/*.cu`` with NVRTC, the compiler
  CuPy uses at run time, for the target architectures;
* :mod:`gpurpo.testing.ptxas` assembles that PTX with ptxas and reports each kernel's
  registers, spills and shared memory;
* :mod:`gpurpo.testing.cuda_emulator` runs the same CUDA C sources on the CPU: each
  block's threads as real threads with a barrier for ``__syncthreads``, ``__shared__``
  as per-block storage, atomics as ``std::atomic_ref``. The ``"emulated"`` backend
  (``use_backend("emulated")``, or ``device="cuda-emulated"`` on an estimator) sends
  every CUDA kernel launch through it, so the CUDA path is tested against the numba
  kernels and NumPy references on any machine.
"""
