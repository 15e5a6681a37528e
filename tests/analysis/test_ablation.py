"""The ablation tables and recommendations (issue 12) on a synthetic file whose cells have
constant step times and chosen peak memory, so every figure is computed by hand below."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import ablation

import make_results as mr
from conftest import run_cli

STEP_S = {  # (precision, channels_last, cudnn_benchmark) -> step time
    ("fp32", False, False): 0.010,
    ("bf16", False, False): 0.006,
    ("fp32", True, False): 0.008,
    ("bf16", True, False): 0.005,
    ("fp32", False, True): 0.0125,  # slower alone: last in the cumulative order
    ("bf16", True, True): 0.004,
}
PEAK_BYTES = {
    ("fp32", False, False): 3.0 * 2**30,
    ("bf16", False, False): 2.0 * 2**30,
    ("fp32", True, False): 3.0 * 2**30,
    ("bf16", True, False): 1.5 * 2**30,
    ("fp32", False, True): 3.0 * 2**30,
    ("bf16", True, True): 0.9 * 2**30,
}


def _spec(precision, channels_last, cudnn_benchmark):
    spec = mr.make_spec("main", "train", 16, 1, precision=precision)
    del spec["cell_id"], spec["source"]
    spec["channels_last"] = channels_last
    if cudnn_benchmark:  # a switch added later: in the spec only when not its default
        spec["cudnn_benchmark"] = True
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    spec["source"] = "ablation.yaml:3"
    spec["cell_id"] = f"{mr.fnv1a64(canonical):016x}"
    return spec


@pytest.fixture(scope="module")
def ablation_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ablation") / "ablation.h5"
    rng = np.random.default_rng(1)
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        mr._root_attrs(f, path)
        cells = f.create_group("cells")
        for key, step in STEP_S.items():
            spec = _spec(*key)
            timings = np.empty((1, mr.WARMUP + mr.MEASURED, len(mr.TRAIN_PHASES)))
            timings[:, :, :-1] = step / (len(mr.TRAIN_PHASES) - 1)
            timings[:, :, -1] = step
            mr._write_cell(cells, spec, "ok", rng, timings, [mr.WARMUP + mr.MEASURED])
            group = cells[spec["cell_id"]]
            metrics = group["rank_metrics"][()]
            metrics[:, mr.RANK_METRICS.index("peak_rss_bytes")] = PEAK_BYTES[key]
            group["rank_metrics"][...] = metrics
            mr.write_summary(group)
        mr.fix_strings(f)
    return str(path)


def _tables(path):
    analysis = sa.analyze(path, sa.AnalysisOptions(ablation=True))
    return analysis.sections


def test_each_change_alone_against_the_baseline(ablation_file):
    table = _tables(ablation_file)["ablation"].set_index("change")
    assert set(table.index) == {"+bf16", "+channels_last", "+cudnn_benchmark"}
    assert table.loc["+bf16", "speedup"] == pytest.approx(0.010 / 0.006)
    assert table.loc["+channels_last", "speedup"] == pytest.approx(1.25)
    assert table.loc["+cudnn_benchmark", "speedup"] == pytest.approx(0.8)
    assert table.loc["+bf16", "median"] == "6.000 ms (1.67x)"
    assert table.loc["+bf16", "memory_change_mib"] == pytest.approx(-1024.0)
    assert table.loc["+channels_last", "memory_change_mib"] == pytest.approx(0.0)
    assert (table["accuracy"] == "not checked").all()


def test_cumulative_adds_the_changes_best_first(ablation_file):
    table = _tables(ablation_file)["cumulative"]
    assert list(table["change"]) == ["baseline", "+bf16", "+channels_last", "+cudnn_benchmark"]
    assert list(table["speedup"]) == pytest.approx([1.0, 10 / 6, 2.0, 2.5])
    assert list(table["median_ms"]) == pytest.approx([10.0, 6.0, 5.0, 4.0])


def test_recommendation_names_the_fastest_with_its_gains(ablation_file):
    rows = _tables(ablation_file)["recommendations"]
    assert len(rows) == 1
    text = rows["recommendation"].iloc[0]
    assert text.startswith("bf16 + channels_last + cudnn_benchmark: 2.50x faster")
    assert "2.1 GiB less memory" in text  # 3.0 - 0.9
    assert "accuracy not checked" in text


def test_untrusted_cells_are_marked_and_not_recommended(ablation_file):
    sections = sa.analyze(
        ablation_file,
        sa.AnalysisOptions(ablation=True, quality=sa.QualityOptions(max_cv=-1.0)),
    ).sections
    assert not sections["ablation"]["trusted"].any()
    assert "no trusted cell" in sections["recommendations"]["recommendation"].iloc[0]


def test_analyze_ablation_prints_the_tables(ablation_file):
    out = run_cli("analyze", ablation_file, "--ablation", check_rc=0).stdout
    assert "Ablation" in out and "Cumulative" in out and "Recommendations" in out
    assert "(1.67x)" in out
    assert "Ablation" not in run_cli("analyze", ablation_file, check_rc=0).stdout


FAILED_CHECK = "mae_rel 0.0213 > 0.01"


def _with_accuracy(src, dst, failed: set) -> str:
    """A copy of `src` whose every cell has an accuracy group: failed for the keys in
    `failed` (one failed check, FAILED_CHECK), passed for the others."""
    shutil.copyfile(src, dst)
    for key in STEP_S:
        if key in failed:
            mr.add_accuracy(dst, _spec(*key)["cell_id"], "failed", [FAILED_CHECK], mae_rel=0.0213)
        else:
            mr.add_accuracy(dst, _spec(*key)["cell_id"], "passed", mae_rel=0.001)
    return str(dst)


def test_accuracy_failed_cell_is_marked_and_not_recommended(ablation_file, tmp_path):
    path = _with_accuracy(ablation_file, tmp_path / "acc.h5", {("bf16", True, True)})
    sections = _tables(path)
    text = sections["recommendations"]["recommendation"].iloc[0]
    assert text == (
        "bf16 + channels_last: 2.00x faster, 1.5 GiB less memory, accuracy kept; "
        "not recommended: bf16 + channels_last + cudnn_benchmark "
        f"(2.50x faster, ACCURACY FAILED: {FAILED_CHECK})"
    )
    assert sections["recommendations"]["cell_id"].iloc[0] == _spec("bf16", True, False)["cell_id"]
    table = sections["ablation"].set_index("change")
    assert table.loc["+bf16", "accuracy"] == "passed"
    cumulative = sections["cumulative"].set_index("change")
    assert cumulative.loc["+cudnn_benchmark", "accuracy"] == f"FAIL ({FAILED_CHECK})"
    assert cumulative.loc["+channels_last", "accuracy"] == "passed"


def test_slower_accuracy_failure_does_not_change_the_recommendation(ablation_file, tmp_path):
    path = _with_accuracy(ablation_file, tmp_path / "acc.h5", {("bf16", False, False)})
    sections = _tables(path)
    text = sections["recommendations"]["recommendation"].iloc[0]
    assert text == (
        "bf16 + channels_last + cudnn_benchmark: 2.50x faster, 2.1 GiB less memory, accuracy kept"
    )
    assert sections["ablation"].set_index("change").loc["+bf16", "accuracy"] == (
        f"FAIL ({FAILED_CHECK})"
    )


def test_baseline_is_kept_when_every_faster_cell_failed_accuracy(ablation_file, tmp_path):
    faster = {key for key, step in STEP_S.items() if step < STEP_S[("fp32", False, False)]}
    path = _with_accuracy(ablation_file, tmp_path / "acc.h5", faster)
    text = _tables(path)["recommendations"]["recommendation"].iloc[0]
    assert text == (
        "keep the baseline: no change made it faster with accuracy kept; not recommended: "
        f"bf16 + channels_last + cudnn_benchmark (2.50x faster, ACCURACY FAILED: {FAILED_CHECK})"
    )


def test_no_recommendation_when_every_cell_failed_accuracy(ablation_file, tmp_path):
    path = _with_accuracy(ablation_file, tmp_path / "acc.h5", set(STEP_S))
    text = _tables(path)["recommendations"]["recommendation"].iloc[0]
    assert text == (
        "no trusted cell kept its accuracy; not recommended: "
        f"bf16 + channels_last + cudnn_benchmark (2.50x faster, ACCURACY FAILED: {FAILED_CHECK})"
    )


def test_changes_are_judged_over_runs(ablation_file):
    """Run once, each change is inconclusive (one run per side, issue 40). Repeated (3 runs
    each, 1 % apart), each cell is one row and the changes are judged: bf16 and
    channels_last faster, cudnn_benchmark slower."""
    single = _tables(ablation_file)["ablation"].set_index("change")
    assert set(single.verdict) == {"inconclusive"}
    cells = sa.load(ablation_file).cells
    runs = []
    for k, factor in enumerate((1.0, 1.01, 0.99)):
        copy = cells.copy()
        copy["series_id"] = cells["cell_id"]
        copy["cell_id"] = cells["cell_id"] + f"-{k}"
        copy["median_s"] = cells["median_s"] * factor
        runs.append(copy)
    table = ablation.ablation_tables(pd.concat(runs, ignore_index=True))["ablation"]
    table = table.set_index("change")
    assert len(table) == 3
    assert table.loc["+bf16", "verdict"] == "improvement"
    assert table.loc["+channels_last", "verdict"] == "improvement"
    assert table.loc["+cudnn_benchmark", "verdict"] == "regression"
    assert table.loc["+bf16", "time_ratio"] == pytest.approx(0.6, rel=1e-9)
    assert table.loc["+bf16", "ci_low"] < 0.6 < table.loc["+bf16", "ci_high"] < 1.0
