"""Registers, spills and shared memory of every shipped kernel, from ptxas (no GPU needed).

Each ``kernels/*.cu`` is compiled to PTX by NVRTC (as CuPy does at run time) and
assembled by ptxas for sm_80 and sm_90. The report (``pytest -s`` prints it) is
the register and spill table of ``docs/gpu.md``; the tests fail when a kernel
spills registers to local memory, or when its registers times the largest
block its launcher uses exceed a multiprocessor's register file (a launch that
would fail with "too many resources requested" on a device).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

pytest.importorskip(
    "cuda.bindings.nvrtc",
    reason="cuda-bindings is not installed (pip install 'gpurpo[test]' for the NVRTC compile check)",
)

from gpurpo import backend  # noqa: E402
from gpurpo.testing import ptxas  # noqa: E402
from gpurpo.testing.nvrtc import compile_ptx  # noqa: E402
from gpurpo.tree import _kernels_cuda as launch  # noqa: E402
from gpurpo.tree import _level_cuda as level_launch  # noqa: E402

try:
    ptxas.ptxas_path()
except ptxas.PtxasUnavailableError as exc:  # pragma: no cover - CI installs the wheel
    pytest.skip(str(exc), allow_module_level=True)

GPUS = {"sm_80": "compute_80", "sm_90": "compute_90"}
SOURCES = sorted(p.name for p in backend.kernel_dir().glob("*.cu"))

# The most threads per block each launcher asks for (gpurpo/tree/_kernels_cuda.py,
# gpurpo/tree/_level_cuda.py);
# kernels not listed launch ELEMENTWISE_BLOCK threads.
LAUNCH_BLOCK = {
    # blocks that opt in to more shared memory are wider, up to the device's limit
    "tree_histograms_shared": 1024,
    "tree_histograms_global": launch.HIST_BLOCK,
    "tree_node_stats": launch.NODE_STATS_BLOCK,
    "tree_level_large_setup": launch.NODE_STATS_BLOCK,
    "tree_partition": launch.PARTITION_BLOCK,
    "tree_split_small": launch.SPLIT_MAX_THREADS,
    "tree_grow_subtrees": launch.SPLIT_MAX_THREADS,
    "tree_score_histograms": launch.SCORE_BLOCK,
    "tree_score_best_slot": launch.SCORE_BLOCK,
    "tree_level_split": launch.PARTITION_BLOCK,
    "tree_level_children": level_launch.CHILDREN_BLOCK,
    "tree_best_first_select": level_launch.CHILDREN_BLOCK,
}


@functools.cache
def _ptx(source: str, gpu: str) -> str:
    return compile_ptx(backend.kernel_source(source), GPUS[gpu], backend.CUDA_COMPILE_OPTIONS, name=source)


@functools.cache
def _resources(source: str, gpu: str) -> dict[str, ptxas.KernelResources]:
    return ptxas.kernel_resources(_ptx(source, gpu), gpu)


def _all(gpu: str) -> dict[str, ptxas.KernelResources]:
    return {name: res for source in SOURCES for name, res in _resources(source, gpu).items()}


def test_parser_reads_a_report_with_and_without_shared_memory():
    log = (
        "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
        "ptxas info    : Function properties for a\n"
        "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 7360 bytes smem\n"
        "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
        "ptxas info    : Function properties for b\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 12 registers, used 0 barriers\n"
    )
    got = ptxas._parse(log)
    assert got["a"] == ptxas.KernelResources("a", 40, 16, 8, 4, 7360)
    assert got["a"].spills and not got["b"].spills
    assert got["b"] == ptxas.KernelResources("b", 12, 0, 0, 0, 0)
    assert got["a"].max_block_threads() == 65536 // 40


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"gpu must look like 'sm_90', got 'compute_90'"):
        ptxas.kernel_resources(".version 8.0", "compute_90")
    with pytest.raises(TypeError, match="ptx must be a str, got bytes"):
        ptxas.kernel_resources(b".version 8.0")
    with pytest.raises(RuntimeError, match="rejected"):
        ptxas.kernel_resources("this is not PTX", "sm_90")


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_kernel_is_reported(gpu):
    from gpurpo.testing.nvrtc import ptx_entries

    for source in SOURCES:
        assert set(_resources(source, gpu)) == ptx_entries(_ptx(source, gpu)), source


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_no_kernel_spills_registers_to_local_memory(gpu):
    report = _all(gpu)
    print(f"\n{gpu}: kernel, registers, stack, spill stores/loads, static shared bytes")
    for name, res in sorted(report.items()):
        print(f"  {name}: {res.registers}, {res.stack_frame}, {res.spill_stores}/{res.spill_loads}, "
              f"{res.shared_bytes}")
    spilling = {name: (res.spill_stores, res.spill_loads) for name, res in report.items() if res.spills}
    assert not spilling, spilling


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_launch_blocks_fit_the_register_file(gpu):
    too_big = {
        name: (res.registers, LAUNCH_BLOCK.get(name, launch.ELEMENTWISE_BLOCK))
        for name, res in _all(gpu).items()
        if LAUNCH_BLOCK.get(name, launch.ELEMENTWISE_BLOCK) > res.max_block_threads()
    }
    assert not too_big, too_big


def test_launch_table_names_real_kernels():
    known = set(_all("sm_90"))
    assert set(LAUNCH_BLOCK) <= known, set(LAUNCH_BLOCK) - known
    assert Path(backend.kernel_dir()).is_dir()
