"""Every CUDA source compiles with NVRTC (the compiler CuPy uses) for sm_80 and sm_90.

Runs without a GPU or driver through the cuda-bindings + nvidia-cuda-nvrtc-cu12
wheels. Covers the kernels of ``kernels/`` (what gpurpo ships) and the test
kernels of the CUDA emulator (proving they are real CUDA).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

pytest.importorskip(
    "cuda.bindings.nvrtc",
    reason="cuda-bindings is not installed (pip install 'gpurpo[test]' for the NVRTC compile check)",
)

from gpurpo import backend  # noqa: E402
from gpurpo.testing.nvrtc import (  # noqa: E402
    NvrtcError,
    compile_ptx,
    kernel_names,
    nvrtc_version,
    ptx_entries,
)

ARCHS = ("compute_80", "compute_90")
TEST_KERNELS = sorted((Path(__file__).parent / "cuda_kernels").glob("*.cu"))


def _shipped_kernels() -> list[Path]:
    try:
        return sorted(backend.kernel_dir().glob("*.cu"))
    except FileNotFoundError:  # no kernels shipped yet
        return []


SOURCES = _shipped_kernels() + TEST_KERNELS


def test_there_are_sources_to_check():
    assert TEST_KERNELS, "the emulator's test kernels are missing"
    assert all(p.suffix == ".cu" for p in SOURCES)


def _source(path: Path) -> str:
    """The text compiled for ``path``: shipped kernels with their headers inlined."""
    if path.parent == Path(__file__).parent / "cuda_kernels":
        return path.read_text()
    return backend.kernel_source(path.name)


@functools.cache
def _kernel_names(path: Path) -> tuple[str, ...]:
    return tuple(kernel_names(_source(path), backend.CUDA_COMPILE_OPTIONS, name=path.name))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path", SOURCES, ids=[f"{p.parent.name}/{p.name}" for p in SOURCES])
def test_source_compiles_and_defines_its_kernels(path, arch):
    source = _source(path)
    names = _kernel_names(path)
    assert names, f"{path} defines no extern \"C\" __global__ kernel"
    ptx = compile_ptx(source, arch, options=backend.CUDA_COMPILE_OPTIONS, name=path.name)
    assert f".target sm_{arch.split('_')[1]}" in ptx
    entries = ptx_entries(ptx)
    missing = set(names) - entries
    assert not missing, f"kernels of {path.name} missing from the PTX: {sorted(missing)}"
    if shutil.which("g++") is not None:
        # with macros expanded, every C-linkage entry of the PTX is a kernel the emulator exposes
        assert {e for e in entries if not e.startswith("_Z")} == set(names)


def test_syntax_error_fails_with_the_compiler_log():
    source = 'extern "C" __global__ void broken(float* a)\n{\n    a[0] = 1.0f\n}\n'
    with pytest.raises(NvrtcError, match=r"could not compile 'broken.cu' for compute_90") as info:
        compile_ptx(source, "compute_90", name="broken.cu")
    assert 'broken.cu(4): error: expected a ";"' in info.value.log


def test_host_only_code_is_rejected():
    # g++ would accept this (<cstdint> exists on the host); NVRTC has no host headers.
    source = '#include <cstdint>\nextern "C" __global__ void k(int64_t* a) { a[0] = 1; }\n'
    with pytest.raises(NvrtcError, match="cstdint"):
        compile_ptx(source, "compute_80")


def test_ptx_entries_and_kernel_names_agree_on_a_small_source():
    source = (
        "// extern \"C\" __global__ void commented_out(int* a) {}\n"
        'extern "C" __global__ void first(int* a) { a[threadIdx.x] = 1; }\n'
        'extern "C" __global__ void second(float* a, int n) { if (threadIdx.x < n) a[threadIdx.x] = 2.0f; }\n'
    )
    assert kernel_names(source) == ["first", "second"]
    assert ptx_entries(compile_ptx(source, "compute_80")) == {"first", "second"}


def test_compiling_leaves_the_interpreters_one_byte_objects_intact():
    """A clean compile has a one-byte log (its NUL): NVRTC must not write into shared bytes.

    CPython caches one-byte ``bytes`` objects; a log buffer made as ``b" " * 1``
    is that cached object, and NVRTC's NUL terminator would then turn every later
    ``b" "`` (e.g. ``struct.pack("<B", 32)``, pickle's memo index 32) into ``b"\\0"``.
    """
    import struct

    source = 'extern "C" __global__ void clean(float* a) { a[0] = 1.0f; }\n'
    for _ in range(3):
        assert "clean" in ptx_entries(compile_ptx(source, "compute_80"))
    assert struct.pack("<B", 32) == b" "
    assert bytes([32]) == b" " and b"a b".split()[0] + bytes([32]) == b"a "


def test_bad_arch_is_refused():
    with pytest.raises(ValueError, match="arch must look like"):
        compile_ptx("", "ampere")


def test_nvrtc_version_is_12_or_newer():
    major, minor = nvrtc_version()
    assert major >= 12 and minor >= 0
