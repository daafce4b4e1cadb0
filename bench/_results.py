"""One JSON schema for benchmark results, and the functions that write and check it.

A result file under ``bench/results/`` holds the latest run of one benchmark::

    {
      "benchmark": "forest",
      "command": "python bench/forest.py --skip-full --output bench/results/forest-cpu.json",
      "date": "2026-11-28",
      "commit": "1a2b3c4",
      "machine": {"cpu": "AMD EPYC (znver4)", "cores": 2, "gpu": null},
      "versions": {"python": "3.11.7", "numpy": "2.4.6", "scipy": "1.17.1", "numba": "0.68.1",
                   "scikit-learn": "1.9.1", "gpurpo": "0.1.0"},
      "figures": [{"dataset": "delicious-like", "gpurpo_fit_s": 5.67, ...}, ...],
      "summary": [{"data": "...", "anchor": "...", "gpurpo": "3.7x faster, LRAP +0.0015"}],
      "notes": "..."
    }

``figures`` holds every measured row as a flat dict (scalar values only); ``summary``
(optional) the rows that ``bench/render_results.py`` puts into the table of
``docs/benchmarks.md``; ``notes`` (optional) what a reader needs to know beside the figures.
A field nobody recorded is the string ``"unknown"``.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from _machine import cpu_description

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN = "unknown"

#: the keys every record has, and the type of each value
REQUIRED = {
    "benchmark": str,
    "command": str,
    "date": str,
    "commit": str,
    "machine": dict,
    "versions": dict,
    "figures": list,
}
#: the keys a record may have besides those
OPTIONAL = {"summary": list, "notes": str}
MACHINE_KEYS = ("cpu", "cores", "gpu")
VERSION_KEYS = ("python", "numpy", "scipy", "numba", "scikit-learn", "gpurpo")
SUMMARY_KEYS = ("data", "anchor", "gpurpo")
# module imported for each reported package: (version key, module name)
_PACKAGES = (
    ("numpy", "numpy"),
    ("scipy", "scipy"),
    ("numba", "numba"),
    ("scikit-learn", "sklearn"),
    ("xgboost", "xgboost"),
    ("cupy", "cupy"),
    ("gpurpo", "gpurpo"),
)
_OPTIONAL_PACKAGES = ("xgboost", "cupy")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SCALARS = (str, int, float, bool, type(None))


def git_commit(root: Path = ROOT) -> str:
    """Short hash of the checkout's HEAD.

    Parameters
    ----------
    root : Path
        A directory inside the git work tree.

    Returns
    -------
    str
        The short hash, or ``"unknown"`` outside a git work tree or without git.
    """
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return out.stdout.strip() or UNKNOWN


def gpu_name() -> str | None:
    """Name of the first CUDA device that CuPy sees.

    Returns
    -------
    str or None
        The device name, or None without CuPy or without a device.
    """
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    except Exception:  # no CuPy, no driver or no device: a CPU run
        return None
    return name.decode() if isinstance(name, bytes) else str(name)


def machine_description(gpu: str | None = None) -> dict[str, Any]:
    """The ``machine`` entry of a record for this machine.

    Parameters
    ----------
    gpu : str, optional
        The GPU's name when the benchmark ran on one; None for a CPU run.

    Returns
    -------
    dict
        ``{"cpu": ..., "cores": ..., "gpu": ...}``.
    """
    return {"cpu": cpu_description(), "cores": os.cpu_count() or UNKNOWN, "gpu": gpu}


def library_versions() -> dict[str, str]:
    """Versions of Python and of the packages a benchmark uses.

    Returns
    -------
    dict
        Python, NumPy, SciPy, numba, scikit-learn and gpurpo always (``"unknown"`` when a
        package is missing), XGBoost and CuPy only where they import.
    """
    versions = {"python": platform.python_version()}
    for key, module in _PACKAGES:
        try:
            versions[key] = str(importlib.import_module(module).__version__)
        except Exception:  # not installed, or unusable here
            if key not in _OPTIONAL_PACKAGES:
                versions[key] = UNKNOWN
    return versions


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that ran the benchmark, with the script's path relative to the repository.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments, script first; default ``sys.argv``.

    Returns
    -------
    str
        A shell-quoted command line, e.g. ``"python bench/forest.py --quick"``.
    """
    argv = list(sys.argv if argv is None else argv)
    if argv:
        script = Path(argv[0]).resolve()
        if script.is_relative_to(ROOT):
            argv[0] = str(script.relative_to(ROOT))
    return shlex.join(["python", *argv])


def make_record(
    benchmark: str,
    figures: Iterable[Mapping[str, Any]],
    summary: Iterable[Mapping[str, str]] | None = None,
    *,
    command: str | None = None,
    gpu: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Build a result record of this run on this machine.

    Parameters
    ----------
    benchmark : str
        The benchmark's name, e.g. ``"forest"``.
    figures : iterable of mapping
        One flat dict per measured row or configuration.
    summary : iterable of mapping, optional
        Rows ``{"data", "anchor", "gpurpo"}`` for the table of ``docs/benchmarks.md``.
    command : str, optional
        The command line; default :func:`command_line` of ``sys.argv``.
    gpu : str, optional
        The GPU's name when the benchmark ran on one.
    notes : str, optional
        Remarks a reader needs beside the figures.

    Returns
    -------
    dict
        A record that :func:`validate_record` accepts.
    """
    record: dict[str, Any] = {
        "benchmark": benchmark,
        "command": command if command is not None else command_line(),
        "date": datetime.date.today().isoformat(),
        "commit": git_commit(),
        "machine": machine_description(gpu),
        "versions": library_versions(),
        "figures": [_plain(dict(row)) for row in figures],
    }
    if summary is not None:
        record["summary"] = [dict(row) for row in summary]
    if notes:
        record["notes"] = notes
    return validate_record(record, benchmark)


def write_record(path: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """Validate ``record`` and write it as indented JSON.

    Parameters
    ----------
    path : str or path-like
        The file to write; its folder is created.
    record : mapping
        A record from :func:`make_record`.

    Returns
    -------
    Path
        The file written.
    """
    path = Path(path)
    validate_record(record, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    return path


def validate_record(record: Any, source: str = "record") -> dict[str, Any]:
    """Check that ``record`` follows the schema.

    Parameters
    ----------
    record : object
        The decoded JSON.
    source : str
        Where it came from, for the error message.

    Returns
    -------
    dict
        ``record`` itself.

    Raises
    ------
    ValueError
        Naming the missing or malformed key.
    """
    if not isinstance(record, dict):
        raise ValueError(f"{source}: a result record is a JSON object, not {type(record).__name__}")
    for key, kind in REQUIRED.items():
        if key not in record:
            raise ValueError(f"{source}: missing key {key!r}")
        if not isinstance(record[key], kind):
            raise ValueError(f"{source}: {key!r} must be a {kind.__name__}")
    extra = set(record) - set(REQUIRED) - set(OPTIONAL)
    if extra:
        raise ValueError(f"{source}: unknown keys {sorted(extra)}")
    for key, kind in OPTIONAL.items():
        if key in record and not isinstance(record[key], kind):
            raise ValueError(f"{source}: {key!r} must be a {kind.__name__}")
    if record["date"] != UNKNOWN and not _DATE.fullmatch(record["date"]):
        raise ValueError(f"{source}: 'date' must be YYYY-MM-DD or 'unknown', not {record['date']!r}")
    machine = record["machine"]
    for key in MACHINE_KEYS:
        if key not in machine:
            raise ValueError(f"{source}: missing key 'machine.{key}'")
    if not isinstance(machine["cpu"], str):
        raise ValueError(f"{source}: 'machine.cpu' must be a string")
    if not (isinstance(machine["cores"], int) or machine["cores"] == UNKNOWN):
        raise ValueError(f"{source}: 'machine.cores' must be an integer or 'unknown'")
    if not (machine["gpu"] is None or isinstance(machine["gpu"], str)):
        raise ValueError(f"{source}: 'machine.gpu' must be a string or null")
    for key in VERSION_KEYS:
        if key not in record["versions"]:
            raise ValueError(f"{source}: missing key 'versions.{key}'")
    for key, value in record["versions"].items():
        if not isinstance(value, str):
            raise ValueError(f"{source}: 'versions.{key}' must be a string")
    if not record["figures"]:
        raise ValueError(f"{source}: 'figures' is empty")
    for i, row in enumerate(record["figures"]):
        if not isinstance(row, dict):
            raise ValueError(f"{source}: 'figures[{i}]' must be an object")
        for key, value in row.items():
            if not isinstance(value, _SCALARS):
                raise ValueError(f"{source}: 'figures[{i}].{key}' must be a scalar (figures are flat)")
    for i, row in enumerate(record.get("summary", [])):
        if not isinstance(row, dict):
            raise ValueError(f"{source}: 'summary[{i}]' must be an object")
        for key in SUMMARY_KEYS:
            if key not in row:
                raise ValueError(f"{source}: missing key 'summary[{i}].{key}'")
            if not isinstance(row[key], str):
                raise ValueError(f"{source}: 'summary[{i}].{key}' must be a string")
    return record


def load_record(path: str | os.PathLike) -> dict[str, Any]:
    """Read a result file and validate it.

    Parameters
    ----------
    path : str or path-like
        A JSON result file.

    Returns
    -------
    dict
        The record.

    Raises
    ------
    ValueError
        When the file is not JSON or does not follow the schema.
    """
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc
    return validate_record(record, str(path))


def inputs_text(row: Mapping[str, Any]) -> str:
    """``"text-like X (4.0 % ones), CSR labels"``: a figure row's kind of inputs and label container."""
    x = ("continuous X" if row["features"] == "continuous"
         else f"text-like X ({100 * row['x_density']:.1f} % ones)")
    return f"{x}, {'CSR' if row['labels'] == 'csr' else 'dense'} labels"


def times_faster(anchor_s: float, gpurpo_s: float) -> str:
    """``"3.7x faster"`` (or ``"2.8x slower"``) for the anchor's and gpurpo's times.

    Parameters
    ----------
    anchor_s, gpurpo_s : float
        Times of the anchor and of gpurpo, in seconds.

    Returns
    -------
    str
        The ratio with one decimal (none from 100 up).
    """
    return speedup_text(anchor_s / gpurpo_s)


def speedup_text(ratio: float) -> str:
    """``"3.7x faster"`` for a ratio anchor / gpurpo above 1, ``"2.8x slower"`` below.

    Parameters
    ----------
    ratio : float
        The anchor's time over gpurpo's.

    Returns
    -------
    str
        The ratio with one decimal (none from 100 up).
    """
    value, word = (ratio, "faster") if ratio >= 1 else (1 / ratio, "slower")
    return f"{value:.0f}x {word}" if value >= 100 else f"{value:.1f}x {word}"


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with NumPy scalars as Python numbers and NaN as None (JSON has no NaN)."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        if isinstance(value, float) and value != value:
            value = None
        out[key] = value
    return out
