"""Fail CI early when a tool the CUDA-path tests need is missing.

The tests that compile ``kernels/*.cu`` with NVRTC and run them through the
CPU emulation of CUDA skip on a machine without g++ or the NVRTC wheels. In
CI a skip there would hide a broken kernel, so this script checks, before the
suite runs, that

* g++ compiles and runs a C++20 program with ``-std=c++20 -pthread`` that
  uses ``std::barrier`` and ``std::atomic_ref<float>`` (what the emulator
  header needs);
* ``cuda.bindings.nvrtc`` imports and NVRTC compiles a trivial kernel to PTX;
* ptxas (the ``nvidia-cuda-nvcc-cu12`` wheel) assembles that PTX and reports
  the kernel's registers (the register and spill tests need it);
* the CUDA emulator builds and runs a trivial kernel with the right result.

It prints one line per check and exits with status 1 naming every check that
failed.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

KERNEL = r"""
extern "C" __global__ void add_one(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ float tile[64];
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[threadIdx.x] + 1.0f;
}
"""

CXX20 = r"""
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>
int main() {
    float total = 0.0f;
    std::barrier sync(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] { sync.arrive_and_wait(); std::atomic_ref<float>(total).fetch_add(1.0f); });
    for (auto& th : threads) th.join();
    return total == 4.0f ? 0 : 1;
}
"""


def _first_module(*names: str):
    """Import the first of ``names`` that exists (the testing tools may live under gpurpo.testing)."""
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            errors.append(f"{name}: {exc}")
    raise ModuleNotFoundError("; ".join(errors))


def check_gxx() -> str:
    cxx = shutil.which("g++")
    if cxx is None:
        raise RuntimeError("g++ is not on PATH (the CUDA emulator compiles kernels with it)")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "check.cpp", Path(tmp) / "check"
        src.write_text(CXX20)
        build = subprocess.run([cxx, "-std=c++20", "-pthread", "-O1", str(src), "-o", str(exe)],
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise RuntimeError(f"g++ -std=c++20 -pthread failed:\n{build.stderr.strip()}")
        if subprocess.run([str(exe)]).returncode != 0:
            raise RuntimeError("a C++20 program with std::barrier and std::atomic_ref gave a wrong result")
    version = subprocess.run([cxx, "-dumpfullversion"], capture_output=True, text=True).stdout.strip()
    return f"g++ {version} at {cxx}"


def check_nvrtc() -> str:
    importlib.import_module("cuda.bindings.nvrtc")
    nvrtc_check = _first_module("gpurpo.testing.nvrtc")
    ptx = nvrtc_check.compile_ptx(KERNEL, arch="compute_90", name="preflight.cu")
    if "add_one" not in nvrtc_check.ptx_entries(ptx):
        raise RuntimeError("NVRTC compiled the trivial kernel but its PTX has no add_one entry")
    major, minor = nvrtc_check.nvrtc_version()
    return f"NVRTC {major}.{minor} through {nvrtc_check.__name__}"


def check_ptxas() -> str:
    ptxas = _first_module("gpurpo.testing.ptxas")
    nvrtc_check = _first_module("gpurpo.testing.nvrtc")
    ptx = nvrtc_check.compile_ptx(KERNEL, arch="compute_90", name="preflight.cu")
    report = ptxas.kernel_resources(ptx, "sm_90")
    if "add_one" not in report:
        raise RuntimeError("ptxas assembled the trivial kernel but reported no add_one")
    return f"ptxas at {ptxas.ptxas_path()} ({report['add_one'].registers} registers for add_one)"


def check_emulator() -> str:
    import numpy as np

    emulator = _first_module("gpurpo.testing.cuda_emulator")
    kernel = emulator.raw_kernel(KERNEL, "add_one")
    n = 100
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    kernel(((n + 63) // 64,), (64,), (x, y, np.int32(n)))
    if not np.array_equal(y, x + 1):
        raise RuntimeError("the emulated add_one kernel gave a wrong result")
    return f"CUDA emulator {emulator.__name__} ran a kernel"


def main() -> int:
    failed = []
    for name, check in (("g++", check_gxx), ("NVRTC", check_nvrtc), ("ptxas", check_ptxas),
                        ("emulator", check_emulator)):
        try:
            print(f"preflight {name}: ok ({check()})", flush=True)
        except Exception as exc:
            print(f"preflight {name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            failed.append(name)
    if failed:
        print(f"preflight failed ({', '.join(failed)}): the CUDA-path tests would skip; "
              "install g++ >= 12 and the test extra (pip install -e '.[test]')", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
