"""Helpers of bench/gpu_check.py that a CPU can check.

Its tables put a failed run's error message in a cell; a message spans lines and
may hold pipes, which would end the cell and break the Markdown table. Its
benchmarks run numba on the cores the process may use.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _gpu_check():
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_check
    finally:
        sys.path.pop(0)
    return gpu_check


def test_an_error_stays_in_its_cell():
    gpu_check = _gpu_check()
    error = "Traceback (most recent call last):\n  x | y\nValueError: a|b"
    table = gpu_check._table([{"device": "cuda", "fit s": error}, {"device": "cpu", "fit s": 1.5}])
    lines = table.strip().splitlines()
    assert len(lines) == 4  # header, rule, two rows
    # the unescaped pipes of each row are its 3 cell borders
    for line in lines[2:]:
        assert line.replace("\\|", "").count("|") == 3, line
    assert "ValueError: a\\|b" in lines[2]


def test_host_cores_follow_the_affinity(monkeypatch):
    # numba refuses more threads than the process may run on (a container's cpuset)
    gpu_check = _gpu_check()
    monkeypatch.setattr(gpu_check.os, "sched_getaffinity", lambda pid: {0, 1, 5}, raising=False)
    monkeypatch.setattr(gpu_check.os, "cpu_count", lambda: 64)
    assert gpu_check._host_cores() == 3
    monkeypatch.delattr(gpu_check.os, "sched_getaffinity")
    assert gpu_check._host_cores() == 64


def test_a_report_is_written_after_every_section_and_verifies_only_when_finished(
        tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_verification", BENCH.parent / ".ci" / "gpu_verification.py")
    gv = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gv
    spec.loader.exec_module(gv)
    gpu_check = _gpu_check()
    written = []
    add = gpu_check.Report.add

    def add_and_read(report, title, body):
        add(report, title, body)
        # the file as the section left it
        written.append({p.name: p.read_text() for p in tmp_path.glob("gpu-check-*.md")})

    monkeypatch.setattr(gpu_check.Report, "add", add_and_read)
    # without a GPU: the environment section, then the note that nothing else ran
    assert gpu_check.main(["--out", str(tmp_path), "--budget", "60"]) == 0
    assert len(written) == 2 and all(len(files) == 1 for files in written)
    (name, partial), = written[-1].items()
    assert "## Environment" in partial and "unfinished after 2 sections" in partial
    assert gv.verifications(tmp_path) and "## Skipped" in (tmp_path / name).read_text()
    # the partial file would not have counted as a verification of its commit
    (tmp_path / name).write_text(partial)
    assert gv.verifications(tmp_path) == []
