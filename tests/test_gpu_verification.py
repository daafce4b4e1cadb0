"""The record of the latest GPU verification: reports, docs/gpu.md and the count CI prints."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("gpu_verification", ROOT / ".ci" / "gpu_verification.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_gpu_report_names_its_device_date_and_commit():
    gv = _module()
    reports = sorted(p.name for p in (ROOT / "bench" / "results").glob("gpu-check-*.md"))
    runs = gv.verifications()
    assert sorted(r.report for r in runs) == reports and reports
    for run in runs:
        assert run.device.startswith("NVIDIA") and len(run.commit) >= 7


def test_docs_state_the_latest_verified_commit():
    gv = _module()
    latest, stated = gv.verifications()[0], gv.documented()
    assert stated is not None, "docs/gpu.md has no 'Last verified on a GPU' line"
    assert (stated.commit, stated.device, stated.date) == (latest.commit, latest.device, latest.date)


def test_report_headers_are_parsed_from_the_gpu_check_format(tmp_path):
    gv = _module()
    (tmp_path / "gpu-check-A.md").write_text(
        "# gpurpo GPU check: NVIDIA A100\n\n2026-01-02 10:00:00 UTC, `bash bench/gpu_check.sh`, total 9 s, "
        "git abc1234 (with uncommitted changes)\n")
    (tmp_path / "gpu-check-B.md").write_text(
        "# gpurpo GPU check: NVIDIA B200\n\n2026-03-04 10:00:00 UTC, `bash bench/gpu_check.sh`, total 9 s, "
        "git 1234abc\n")
    (tmp_path / "gpu-profile-C.md").write_text("# gpurpo GPU profile\n")
    runs = gv.verifications(tmp_path)
    assert [(r.device, r.date, r.commit) for r in runs] == [
        ("NVIDIA B200", "2026-03-04", "1234abc"), ("NVIDIA A100", "2026-01-02", "abc1234")]


def test_the_count_of_commits_since_is_gits():
    gv = _module()
    commit = gv.verifications()[0].commit
    try:
        subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("the verified commit is not in this clone's history")
    want = subprocess.run(["git", "log", "--format=%H", f"{commit}..HEAD", "--", *gv.CUDA_PATHS], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.split()
    assert gv.commits_touching_cuda_since(commit) == len(want)
    assert gv.main([]) == 0
