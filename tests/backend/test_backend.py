"""Backend switch, compute-follows-data resolution, RNG and kernel registry."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import gpurpo
from gpurpo import backend as B


class _FakeGpuArray:
    """Stands in for a CuPy array: resolution only looks at the type's module."""

    __module__ = "cupy._core.core"
    shape = (3, 2)


def test_default_backend_follows_host_data(monkeypatch):
    monkeypatch.delenv("GPURPO_BACKEND", raising=False)
    assert B.resolve_backend(np.ones((3, 2))).name == "numpy"
    assert B.resolve_backend(sp.csr_matrix(np.eye(3))).name == "numpy"
    assert B.get_backend().name == "numpy"


def test_gpu_array_detection_by_module():
    assert B.is_gpu_array(_FakeGpuArray())
    assert not B.is_gpu_array(np.ones(2))
    assert not B.is_gpu_array(sp.eye(2, format="csr"))
    assert not B.is_gpu_array(None)


def test_mixing_devices_is_a_clear_error():
    with pytest.raises(ValueError, match="mix host"):
        B.resolve_backend(np.ones((3, 2)), _FakeGpuArray())
    with pytest.raises(ValueError, match="mix host"):
        B.resolve_backend(_FakeGpuArray(), np.ones((3, 2)), device="cpu")


@pytest.mark.skipif(B.cupy_available(), reason="a working CUDA device is present")
def test_device_cuda_accepts_host_inputs_beside_gpu_inputs():
    # device="cuda" moves host inputs to the GPU, so a host Y beside a CuPy X is no mixing
    # error; here the only refusal left is the missing CuPy
    with pytest.raises(B.BackendUnavailableError, match="cupy-cuda12x"):
        B.resolve_backend(_FakeGpuArray(), np.ones((3, 2)), device="cuda")


def test_gpu_input_with_cpu_device_is_refused():
    with pytest.raises(ValueError, match="device='cpu'"):
        B.resolve_backend(_FakeGpuArray(), device="cpu")


def test_unknown_device_and_backend_names():
    with pytest.raises(ValueError, match="device must be one of"):
        B.resolve_backend(np.ones(2), device="tpu")
    with pytest.raises(ValueError, match="backend must be one of"):
        gpurpo.set_backend("torch")


@pytest.mark.skipif(B.cupy_available(), reason="a working CUDA device is present")
def test_cupy_requested_without_gpu_says_what_to_install():
    with pytest.raises(B.BackendUnavailableError, match="pip install"):
        gpurpo.set_backend("cupy")
    with pytest.raises(B.BackendUnavailableError, match="cupy-cuda12x"):
        B.resolve_backend(np.ones(2), device="cuda")


def test_use_backend_context_manager_nests_and_restores(monkeypatch):
    monkeypatch.delenv("GPURPO_BACKEND", raising=False)
    with gpurpo.use_backend("emulated") as outer:
        assert outer.name == "emulated"
        assert B.resolve_backend(np.ones(2)).name == "emulated"
        with gpurpo.use_backend("numpy") as inner:
            assert inner.name == "numpy"
        assert B.get_backend().name == "emulated"
    assert B.get_backend().name == "numpy"


def test_set_backend_and_reset(monkeypatch):
    monkeypatch.delenv("GPURPO_BACKEND", raising=False)
    try:
        gpurpo.set_backend("emulated")
        assert B.get_backend().name == "emulated"
        gpurpo.set_backend("auto")
        expected = "cupy" if B.cupy_available() else "numpy"
        assert B.get_backend().name == expected
    finally:
        gpurpo.set_backend(None)
    assert B.get_backend().name == "numpy"


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("GPURPO_BACKEND", "emulated")
    assert B.get_backend().name == "emulated"
    monkeypatch.setenv("GPURPO_BACKEND", "bogus")
    with pytest.raises(ValueError, match="GPURPO_BACKEND"):
        B.get_backend()


def test_explicit_device_beats_setting(monkeypatch):
    monkeypatch.delenv("GPURPO_BACKEND", raising=False)
    with gpurpo.use_backend("emulated"):
        assert B.resolve_backend(np.ones(2), device="cpu").name == "numpy"
    assert B.resolve_backend(np.ones(2), device="cuda-emulated").name == "emulated"


def test_show_backend_reports_device_and_versions(capsys):
    text = gpurpo.show_backend()
    assert "backend" in text and "device" in text and "numpy" in text
    assert text in capsys.readouterr().out


def test_asarray_keeps_sparse_format_and_dtype():
    a = sp.random(5, 4, density=0.5, format="coo", random_state=0)
    out = B.NUMPY.asarray(a, dtype=np.float32)
    assert sp.issparse(out) and out.format == "csr" and out.dtype == np.float32
    np.testing.assert_allclose(out.toarray(), a.toarray(), rtol=1e-6)
    csc = B.NUMPY.asarray(a.tocsc())
    assert csc.format == "csc"


def test_random_state_handling():
    a = B.check_random_state(3).standard_normal(4)
    b = B.check_random_state(np.random.SeedSequence(3)).standard_normal(4)
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(1)
    assert B.check_random_state(gen) is gen
    assert isinstance(B.check_random_state(np.random.RandomState(0)), np.random.Generator)
    with pytest.raises(TypeError, match="random_state"):
        B.check_random_state("seed")
    with pytest.raises(ValueError, match="random_state"):
        B.check_random_state(-1)
    seeds = B.spawn_seeds(0, 5)
    assert len(set(seeds)) == 5 and seeds == B.spawn_seeds(0, 5)


def test_kernel_registry_dispatch():
    calls = []

    def cpu_impl(x):
        calls.append(("cpu", x))
        return x + 1

    def cuda_impl(backend, x):
        calls.append((backend.name, x))
        return x + 2

    B.register_kernel("_test_increment", cpu=cpu_impl, cuda=cuda_impl)
    assert B.NUMPY.kernel("_test_increment")(1) == 2
    assert B.EMULATED.kernel("_test_increment")(1) == 3
    assert calls == [("cpu", 1), ("emulated", 1)]
    assert B.registered_kernels()["_test_increment"] == ("cpu", "cuda")
    with pytest.raises(KeyError, match="no kernel named"):
        B.NUMPY.kernel("_no_such_kernel")


def test_numpy_backend_has_no_cuda_modules():
    with pytest.raises(B.BackendUnavailableError, match="numba kernels"):
        B.NUMPY.load_module("anything.cu")


def test_kernel_sources_are_found():
    folder = B.kernel_dir()
    names = sorted(p.name for p in folder.glob("*.cu"))
    assert names, "kernels/ holds no CUDA source"
    assert B.kernel_source(names[0]).strip()
    with pytest.raises(FileNotFoundError, match="no CUDA source"):
        B.kernel_source("does_not_exist.cu")


def test_kernel_source_inlines_local_headers(monkeypatch, tmp_path):
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\nint a_value;\n')
    (tmp_path / "b.cuh").write_text("int b_value;\n")
    (tmp_path / "k.cu").write_text(
        '#include "a.cuh"\n  #include "b.cuh"\n#include <cstdint>\nint k_value;\n'
    )
    monkeypatch.setattr(B._sources, "kernel_dir", lambda: tmp_path)
    text = B.kernel_source("k.cu")
    # each header once, in place, nested ones first; system headers left alone
    assert text.count("int b_value;") == 1 and text.count("int a_value;") == 1
    assert text.index("int b_value;") < text.index("int a_value;") < text.index("int k_value;")
    assert "#include <cstdint>" in text and '#include "' not in text
    # a cycle of headers: each one once
    (tmp_path / "c.cuh").write_text('#include "d.cuh"\nint c_value;\n')
    (tmp_path / "d.cuh").write_text('#include "c.cuh"\nint d_value;\n')
    (tmp_path / "cycle.cu").write_text('#include "c.cuh"\n')
    cycle = B.kernel_source("cycle.cu")
    assert cycle.count("int c_value;") == 1 and cycle.count("int d_value;") == 1
    (tmp_path / "bad.cu").write_text('#include "missing.cuh"\n')
    with pytest.raises(FileNotFoundError, match="missing.cuh"):
        B.kernel_source("bad.cu")


def test_shipped_headers_are_used_by_kernels():
    folder = B.kernel_dir()
    headers = sorted(p.name for p in folder.glob("*.cuh"))
    sources = [p.read_text() for p in folder.glob("*.cu")]
    for header in headers:
        assert any(f'#include "{header}"' in text for text in sources), f"{header} is unused"


@pytest.mark.parametrize("seed", range(5))
def test_segment_ids_equal_numpy_repeat(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 6, size=rng.integers(1, 30))
    lengths[0] = 0  # empty segments anywhere, including first and last
    lengths[-1] = 0
    expected = np.repeat(np.arange(len(lengths)), lengths)
    # the NumPy path, and the search used on CuPy (run here on NumPy arrays)
    for fn in (B.segment_ids, B._arrays._segment_ids_by_search):
        got = fn(np, lengths, int(lengths.sum()))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
        assert fn(np, np.zeros(3, dtype=int), 0).shape == (0,)


def test_segment_positions_equal_a_loop_over_ranges():
    starts = np.array([7, 0, 20, 3, 40])
    lengths = np.array([3, 2, 0, 4, 1])
    pos, seg = B.segment_positions(np, starts, lengths, int(lengths.sum()))
    expected = [(s + k, i) for i, (s, n) in enumerate(zip(starts, lengths)) for k in range(n)]
    assert list(zip(pos.tolist(), seg.tolist())) == expected


def test_launch_geometry_respects_the_device_limits():
    attrs = {"warp_size": 32, "max_threads_per_block": 1024, "multiprocessor_count": 4}
    assert B.launch_block(attrs, 256) == 256
    assert B.launch_block(attrs, 100) == 96  # whole warps
    assert B.launch_block(attrs, 8) == 32  # at least one warp
    assert B.launch_block({**attrs, "max_threads_per_block": 512}, 1024) == 512
    assert B.launch_grid(0, 256, attrs) == 1
    assert B.launch_grid(257, 256, attrs) == 2  # one item per thread
    assert B.launch_grid(10**9, 256, attrs) == 4 * B.GRID_WAVES
    assert B.launch_grid(10**9, 256, attrs, waves=2) == 8
