"""The built wheel ships the CUDA sources and an installed package finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("hatchling", reason="hatchling (test extra) builds the wheel offline")
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
           "-w", str(out), str(ROOT)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = list(out.glob("gpurpo-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contains_every_kernel_source(wheel):
    sources = sorted(p.name for p in (ROOT / "kernels").glob("*.cu"))
    assert sources, "kernels/ holds no CUDA source"
    sources += sorted(p.name for p in (ROOT / "kernels").glob("*.cuh"))  # inlined headers
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for name in sources:
        assert f"gpurpo/kernels/{name}" in names, f"{name} missing from {wheel.name}"
    assert "gpurpo/__init__.py" in names and "gpurpo/backend/__init__.py" in names


def test_installed_package_finds_kernels(wheel, tmp_path):
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
           "--target", str(target), str(wheel)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = (
        "import gpurpo, gpurpo.backend as b; "
        "print(gpurpo.__file__); print(b.kernel_dir()); "
        "print(len(list(b.kernel_dir().glob('*.cu'))))"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    module_file, folder, count = run.stdout.split()
    assert Path(module_file).is_relative_to(target)
    assert Path(folder) == target / "gpurpo" / "kernels"
    assert int(count) == len(list((ROOT / "kernels").glob("*.cu")))
