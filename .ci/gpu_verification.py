"""How far the CUDA code has moved since it was last run on a GPU.

CI machines have no GPU: the CUDA kernels are compiled with NVRTC and run in the
CPU emulator there, but only ``bash bench/gpu_check.sh`` on a GPU machine runs
them for real. Each such run writes ``bench/results/gpu-check-<device>.md``,
whose header names the commit it ran on. This script finds the latest of those
reports, counts the commits since then that touched the CUDA sources or their
host wrappers, and checks that ``docs/gpu.md`` names the same verified commit.
It prints what it finds and never fails for want of a GPU; it exits 1 only when
``--strict`` is given and ``docs/gpu.md`` disagrees with the reports.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the CUDA sources and the host code that loads, launches or stands in for them
CUDA_PATHS = (
    "kernels",
    "gpurpo/tree/_kernels_cuda.py",
    "gpurpo/tree/kernels.py",
    "gpurpo/backend",
    "gpurpo/metrics/_ranking_kernels.py",
    "gpurpo/ensemble/boosting/_median_kernels.py",
    "gpurpo/ensemble/boosting/logistic_kernels.py",
    "gpurpo/_top_k.py",
)

_HEADER = re.compile(
    r"^# gpurpo GPU check: (?P<device>.+?)\n+(?P<date>\d{4}-\d{2}-\d{2})[^\n]*?git (?P<commit>[0-9a-f]{7,40})",
    re.M,
)
_DOCS = re.compile(
    r"[Ll]ast verified on a GPU: commit `?(?P<commit>[0-9a-f]{7,40})`? on (?P<device>[^,]+), "
    r"(?P<date>\d{4}-\d{2}-\d{2})"
)


@dataclass(frozen=True)
class Verification:
    """One GPU run: the device, the date and the commit it ran on, and its report."""

    device: str
    date: str
    commit: str
    report: str


def verifications(results: Path = ROOT / "bench" / "results") -> list[Verification]:
    """The GPU runs recorded in ``gpu-check-*.md`` reports, newest first."""
    found = []
    for path in sorted(results.glob("gpu-check-*.md")):
        match = _HEADER.search(path.read_text(errors="replace"))
        if match:
            found.append(Verification(match["device"].strip(), match["date"], match["commit"], path.name))
    return sorted(found, key=lambda v: v.date, reverse=True)


def documented(docs: Path = ROOT / "docs" / "gpu.md") -> Verification | None:
    """The verified commit that ``docs/gpu.md`` states, or None."""
    match = _DOCS.search(docs.read_text()) if docs.exists() else None
    if match is None:
        return None
    return Verification(match["device"].strip(), match["date"], match["commit"], docs.name)


def commits_touching_cuda_since(commit: str) -> int | None:
    """Commits after ``commit`` up to HEAD that touched ``CUDA_PATHS``; None where git cannot tell."""
    try:
        out = subprocess.run(
            ["git", "rev-list", "--count", f"{commit}..HEAD", "--", *CUDA_PATHS],
            cwd=ROOT, capture_output=True, text=True, timeout=30, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return int(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 when docs/gpu.md disagrees with the reports")
    args = parser.parse_args(argv)
    runs = verifications()
    if not runs:
        print("GPU verification: no GPU report under bench/results/ (run bash bench/gpu_check.sh on a GPU)")
        return 0
    latest = runs[0]
    since = commits_touching_cuda_since(latest.commit)
    moved = "an unknown number of" if since is None else str(since)
    print(
        f"GPU verification: last run on {latest.device} on {latest.date} at commit {latest.commit} "
        f"({latest.report}); {moved} commit(s) since then touched the CUDA code"
        + ("" if since == 0 else ": run bash bench/gpu_check.sh on a GPU machine")
    )
    stated = documented()
    if stated is None or stated.commit != latest.commit:
        print(
            f"GPU verification: docs/gpu.md states {stated.commit if stated else 'no verified commit'}, "
            f"the latest report {latest.commit}; update its 'Last verified on a GPU' line"
        )
        return 1 if args.strict else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
