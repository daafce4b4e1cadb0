"""The committed benchmark results follow one schema, and docs/benchmarks.md shows them."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RESULT_FILES = sorted((BENCH / "results").glob("*.json"))


def _load(name: str):
    """A module of bench/ (not a package) by path; sys.path is restored afterwards, so that
    bench's scripts (tree.py, linalg.py, ...) do not shadow other modules of the test run."""
    if name in sys.modules:
        return sys.modules[name]
    saved = list(sys.path)
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


results = _load("_results")
render_results = _load("render_results")


def test_there_are_result_files():
    assert RESULT_FILES, "no bench/results/*.json"


@pytest.mark.parametrize("path", RESULT_FILES, ids=[path.name for path in RESULT_FILES])
def test_committed_result_follows_the_schema(path):
    record = results.load_record(path)
    assert record["summary"], f"{path.name} has no summary row for the docs"
    assert path.name.startswith(record["benchmark"].replace("_", "-"))


def test_docs_table_is_up_to_date():
    docs = render_results.DOCS.read_text()
    assert render_results.render(docs, render_results.load_results()) == docs, (
        "docs/benchmarks.md is out of date: run python bench/render_results.py"
    )
    assert render_results.main(["--check"]) == 0


def test_check_fails_on_an_outdated_page(tmp_path):
    docs = tmp_path / "benchmarks.md"
    text = render_results.DOCS.read_text()
    docs.write_text(text.replace("| data | anchor |", "| data  | anchor |"))
    assert render_results.main(["--check", "--docs", str(docs)]) == 1
    assert render_results.main(["--docs", str(docs)]) == 0
    assert render_results.main(["--check", "--docs", str(docs)]) == 0


def test_render_needs_the_markers():
    with pytest.raises(ValueError, match="markers"):
        render_results.render("# Benchmarks\n", [])


def _a_record() -> dict:
    return json.loads(RESULT_FILES[0].read_text())


@pytest.mark.parametrize("key", list(results.REQUIRED))
def test_a_record_missing_a_key_is_rejected(key):
    record = _a_record()
    del record[key]
    with pytest.raises(ValueError, match=f"missing key '{key}'"):
        results.validate_record(record)


@pytest.mark.parametrize("path", [("machine", "cores"), ("versions", "numpy"), ("summary", 0, "gpurpo")])
def test_a_record_missing_a_nested_key_is_rejected(path):
    record = _a_record()
    parent = record
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    with pytest.raises(ValueError, match=f"missing key .*{path[-1]}"):
        results.validate_record(record)


def test_malformed_records_are_rejected():
    record = _a_record()
    for change, message in [
        (lambda r: r.update(date="28.11.2026"), "date"),
        (lambda r: r["figures"][0].update(nested={"a": 1}), "flat"),
        (lambda r: r.update(figures=[]), "empty"),
        (lambda r: r.update(extra=1), "unknown keys"),
        (lambda r: r["machine"].update(gpu=3), "machine.gpu"),
    ]:
        bad = copy.deepcopy(record)
        change(bad)
        with pytest.raises(ValueError, match=message):
            results.validate_record(bad)
    with pytest.raises(ValueError, match="JSON object"):
        results.validate_record([record])


def test_a_written_record_loads_back(tmp_path):
    figures = [{"dataset": "toy", "fit_s": np.float64(1.5), "n": np.int64(3), "lrap": float("nan")}]
    summary = [{"data": "toy", "anchor": "nothing", "gpurpo": results.times_faster(3.0, 1.5)}]
    record = results.make_record("toy", figures, summary, command="python bench/toy.py", notes="a test")
    path = results.write_record(tmp_path / "toy.json", record)
    loaded = results.load_record(path)
    assert loaded["figures"] == [{"dataset": "toy", "fit_s": 1.5, "n": 3, "lrap": None}]
    assert loaded["summary"][0]["gpurpo"] == "2.0x faster"
    assert loaded["command"] == "python bench/toy.py"
    assert set(results.VERSION_KEYS) <= set(loaded["versions"])
    assert loaded["machine"]["cores"] >= 1


def test_speedup_text():
    assert results.speedup_text(3.74) == "3.7x faster"
    assert results.speedup_text(126.4) == "126x faster"
    assert results.speedup_text(0.5) == "2.0x slower"


@pytest.mark.parametrize("path", [p for p in RESULT_FILES if p.name.startswith("boosting-")],
                         ids=lambda p: p.name)
def test_boosting_summary_is_the_one_its_figures_give(path):
    boosting = _load("boosting")
    record = json.loads(path.read_text())
    assert record["summary"] == boosting.summarize(record["figures"])


def _boosting_row(method, fit_s, score):
    return {"dataset": "toy", "metric": "LRAP", "n_train": 100, "d": 7, "rounds": 10,
            "method": method, "fit_s": fit_s, "score": score}


def test_boosting_summary_compares_with_both_xgboost_strategies_when_both_fit():
    boosting = _load("boosting")
    rows = [_boosting_row("xgboost", 30.0, 0.50), _boosting_row("xgboost_per_output", 12.0, 0.45),
            _boosting_row("relabel_rpo", 2.0, 0.52)]
    (summary,) = boosting.summarize(rows)
    # the anchor is multi_output_tree; the per-output trees, which are faster here, are named
    # with their own ratio (12 / 2 = 6) and score difference (0.52 - 0.45)
    assert summary["anchor"] == "XGBoost `multi_output_tree`"
    assert summary["gpurpo"].startswith("`relabel_rpo` 15.0x faster, LRAP +0.0200")
    assert summary["gpurpo"].endswith(
        "against XGBoost `one_output_per_tree` (12.0 s, LRAP 0.4500): 6.0x faster, LRAP +0.0700")
    # without the per-output fit, nothing is said of it
    (alone,) = boosting.summarize(rows[:1] + rows[2:])
    assert "one_output_per_tree" not in alone["gpurpo"]
