"""``python -m gpurpo``: the README's first command, on small built-in data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("GPURPO_BACKEND", None)
    return subprocess.run([sys.executable, "-m", "gpurpo", *args], capture_output=True,
                          text=True, timeout=600, env=env, cwd=ROOT)


def test_demo_runs_and_reports_every_part():
    proc = _run("demo", "--n-samples", "2000", "--n-labels", "100", "--n-estimators", "10",
                "--device", "cpu")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    ratio = float(re.search(r"randomized SVD.*ratio ([0-9.]+)\)", out).group(1))
    assert 1.0 - 1e-9 <= ratio < 1.05, out  # residual against the optimal rank-k residual
    cssp, uniform = (float(v) for v in re.search(
        r"ML-CSSP.*encoding error ([0-9.]+) \(uniform columns ([0-9.]+)", out).groups())
    assert cssp < uniform, out
    assert "kernels compiled or loaded" in out
    lraps = [float(v) for v in re.findall(r"forest of 10 trees.*test LRAP ([0-9.]+)", out)]
    baseline = float(re.search(r"label-frequency baseline LRAP: ([0-9.]+)", out).group(1))
    # m = 1, ln d, 4 ln d, all outputs: more projections, better rankings (Joly et al. Fig. 1)
    assert len(lraps) == 4 and lraps[-1] > lraps[0] and max(lraps) > baseline, out


def test_info_and_usage():
    info = _run("info")
    assert info.returncode == 0 and "backend" in info.stdout
    assert _run().returncode == 2
    bad = _run("train")
    assert bad.returncode == 2 and "unknown command 'train'" in bad.stderr
