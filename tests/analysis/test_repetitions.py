"""Repetitions (Note [Repetitions], results layout 1.5) in the file under test and in the
analysis: each `/series` group against the reference recomputation of rawdata.py from its
repetitions' summaries, the reference itself on hand-checkable cases, the loader's `series`
table and `series_id`, the Repetitions table of analyze (text, Markdown, JSON), compare
judging a repeated cell as one row over its runs, and the report's Repetitions section.

The synthetic file has a training series of 5 repetitions that disagree and an inference
series of 3 that agree (results_edits.add_repetitions); a real file (SCALEBENCH_RESULTS_FILE)
without repeated cells skips what needs them. test_series.py holds more of the same on a
real run of docs/examples/repetitions.yaml (SCALEBENCH_REPETITIONS_FILE)."""

from __future__ import annotations

import json
import math
import shutil
from math import comb

import h5py
import numpy as np
import pytest
from scipy import stats

import scalebench_analysis as sa
from scalebench_analysis.output import repetitions_text
from scalebench_analysis.read import series

import make_results
import rawdata
import reference_figures
import results_edits
from conftest import run_cli

REL = 1e-12
#: The throughput and time figures of a `/series` group and their reference names.
FIGURES = (
    "median_s",
    "median_s_ci_low",
    "median_s_ci_high",
    "throughput_samples_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "spread_rel",
)


@pytest.fixture(scope="module")
def repeated(raw) -> rawdata.RawFile:
    """The file under test when it has `/series` groups."""
    if not raw.series:
        pytest.skip("the results file has no /series (no cell with repetitions > 1)")
    return raw


def _num(value) -> float:
    return float(value) if value is not None else math.nan


# --- the file's figures against the reference ------------------------------------------


def test_every_series_equals_the_reference_recomputation(repeated):
    members = repeated.series_members()
    assert set(repeated.series) == set(members), "series ids found from the specs"
    for series_id, attrs in repeated.series.items():
        cells = json.loads(attrs["cells"])
        assert cells == members[series_id], series_id
        spec = repeated.cells[series_id].spec
        assert attrs["repetitions"] == spec["repetitions"] > 1
        assert attrs["metric"] == ("step" if spec["mode"] == "train" else "batch")
        want = rawdata.series_reference(repeated, series_id, cells)
        assert attrs["completed"] == want["completed"]
        assert int(attrs["bootstrap_seed"]) == want["bootstrap_seed"]
        for name in FIGURES:
            assert _num(attrs[name]) == pytest.approx(want[name], rel=REL, nan_ok=True), name
        assert bool(attrs["disagree"]) == want["disagree"]
        stored = [_num(m) for m in json.loads(attrs["repetition_median_s"])]
        expected = [_num(m) for m in want["repetition_median_s"]]
        assert stored == pytest.approx(expected, rel=REL, nan_ok=True)
        assert (attrs["max_spread_rel"], attrs["confidence"]) == (0.10, 0.95)
        assert attrs["bootstrap_resamples"] == 10000


def test_the_synthetic_series_disagree_as_planted(repeated, synthetic):
    if not synthetic:
        pytest.skip("the plant of the synthetic file")
    by_metric = {a["metric"]: a for a in repeated.series.values()}
    assert set(by_metric) == {"step", "batch"}
    assert by_metric["step"]["disagree"] == 1 and by_metric["step"]["spread_rel"] > 0.10
    assert by_metric["batch"]["disagree"] == 0 and by_metric["batch"]["spread_rel"] < 0.10
    assert [by_metric[m]["completed"] for m in ("step", "batch")] == [5, 3]


# --- the reference itself --------------------------------------------------------------


def test_splitmix64_stream_is_the_reference_sequence():
    """Vigna's splitmix64 from seed 0 (tests/unit/common/repetition_stats_test.cc), and the
    vectorised stream equal to make_results' step-by-step generator."""
    assert list(rawdata.splitmix64_stream(0, 3)) == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]
    seed, state, stepped = rawdata.fnv1a64("abc"), rawdata.fnv1a64("abc"), []
    for _ in range(1000):
        state, value = reference_figures.splitmix64(state)
        stepped.append(value)
    assert list(rawdata.splitmix64_stream(seed, 1000)) == stepped
    assert rawdata.fnv1a64("abc") == make_results.fnv1a64("abc")


def test_reference_on_one_to_five_is_the_extreme_values():
    """n = 5 values: a resample's median is one of them, and P(median <= 1) = P(three or
    more of five draws are the 1) = 0.058 > 0.025: the 2.5 % point is 1, the 97.5 % point
    5 by symmetry (10000 draws cannot move a percentile that far)."""
    p = sum(comb(5, k) * 0.2**k * 0.8 ** (5 - k) for k in range(3, 6))
    assert p == pytest.approx(0.05792)
    for seed in (0, 1, rawdata.fnv1a64("hand")):
        low, high = rawdata.bootstrap_median_interval([3.0, 1.0, 5.0, 2.0, 4.0], seed)
        assert (low, high) == (1.0, 5.0)
        medians = rawdata.bootstrap_medians([1.0, 2.0, 3.0, 4.0, 5.0], seed)
        assert set(np.unique(medians)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
        assert np.mean(medians <= 1.0) == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / 1e4))


def test_reference_degenerate_inputs():
    assert rawdata.bootstrap_median_interval([2.5, 2.5, 2.5, 2.5], seed=7) == (2.5, 2.5)
    assert all(math.isnan(v) for v in rawdata.bootstrap_median_interval([1.0], seed=7))
    assert all(math.isnan(v) for v in rawdata.bootstrap_median_interval([], seed=7))
    with_nan = rawdata.bootstrap_median_interval([1.0, math.nan, 2.0, 4.0], seed=7)
    assert with_nan == rawdata.bootstrap_median_interval([1.0, 2.0, 4.0], seed=7)


def _exact_quantile(support: np.ndarray, cdf: np.ndarray, q: float) -> float:
    """The smallest support point whose exact CDF reaches q."""
    return float(support[np.searchsorted(cdf, q - 1e-15)])


def test_reference_against_the_exact_bootstrap_distribution():
    """n = 4: the 4^4 = 256 equally likely resamples enumerated give the exact distribution
    of the resample median. The 10000 Monte Carlo medians match it (each support point's
    frequency within 4.5 standard errors), and each bound lies between the exact quantiles
    at its level -/+ 4 standard errors of a Monte Carlo percentile."""
    values = np.array([1.0, 2.0, 4.0, 8.0])
    codes = np.indices((4,) * 4).reshape(4, -1).T
    exact = np.median(values[codes], axis=1)
    support, counts = np.unique(exact, return_counts=True)
    probability = counts / counts.sum()
    cdf = np.cumsum(probability)
    resamples = 10000
    for seed in (3, rawdata.fnv1a64("exact")):
        medians = rawdata.bootstrap_medians(values, seed, resamples)
        assert set(np.unique(medians)) <= set(support)
        for point, p in zip(support, probability):
            found = np.mean(medians == point)
            assert abs(found - p) <= 4.5 * math.sqrt(p * (1 - p) / resamples), point
        low, high = rawdata.bootstrap_median_interval(values, seed, resamples)
        for bound, q in ((low, 0.025), (high, 0.975)):
            slack = 4 * math.sqrt(q * (1 - q) / resamples)
            lowest = _exact_quantile(support, cdf, max(q - slack, 0.0))
            highest = _exact_quantile(support, cdf, min(q + slack, 1.0))
            assert lowest <= bound <= highest, (bound, q)


# --- the loader ------------------------------------------------------------------------


def test_loader_series_table_and_series_ids(results_file, repeated):
    results = sa.load(results_file)
    table = results.series.set_index("series_id")
    assert set(table.index) == set(repeated.series)
    cells = results.cells.set_index("cell_id")
    for series_id, attrs in repeated.series.items():
        row = table.loc[series_id]
        assert row.cells == json.loads(attrs["cells"])
        for name in FIGURES:
            assert row[name] == pytest.approx(_num(attrs[name]), rel=0, nan_ok=True)
        assert (row.completed, row.repetitions) == (attrs["completed"], attrs["repetitions"])
        assert row.disagree == bool(attrs["disagree"])
        first = cells.loc[series_id]
        assert row.label == first.label.split(" rep ")[0]
        for name in ("branch", "experiment", "mode", "precision", "batch_size", "world_size"):
            assert row[name] == first[name], name
    member_of = {c: s for s, ids in repeated.series_members().items() for c in ids}
    for cell in results.cells.itertuples():
        spec = repeated.cells[cell.cell_id].spec
        assert cell.repetition == spec.get("repetition", 0)
        assert cell.repetitions == spec.get("repetitions", 1)
        assert cell.series_id == member_of.get(cell.cell_id, cell.cell_id)
        if cell.repetitions > 1:
            assert cell.label.endswith(f" rep {cell.repetition + 1}/{cell.repetitions}")
    # The repetitions of a series follow each other in order.
    for ids in repeated.series_members().values():
        listed = [c for c in results.cells.cell_id if c in set(ids)]
        assert listed == ids


def test_series_ids_without_the_series_group(results_file, repeated, tmp_path):
    """An interrupted run has no `/series`: the series table is empty, the cells still know
    their series from their specs (None once the repetition 0 is gone)."""
    path = tmp_path / "no_series.h5"
    shutil.copyfile(results_file, path)
    with h5py.File(path, "r+") as f:
        del f["series"]
    results = sa.load(path)
    assert results.series.empty
    assert list(results.series.columns) == series.COLUMNS + series.LABEL_COLUMNS
    member_of = {c: s for s, ids in repeated.series_members().items() for c in ids}
    ids = dict(zip(results.cells.cell_id, results.cells.series_id))
    assert all(ids[c] == member_of.get(c, c) for c in ids)
    assert "repetitions" not in sa.analyze(results).sections
    first = sorted(repeated.series)[0]
    with h5py.File(path, "r+") as f:
        del f["cells"][first]
    ids = dict(zip(*(sa.load(path).cells[c] for c in ("cell_id", "series_id"))))
    assert all(ids[c] is None for c in repeated.series_members()[first][1:])


def test_damaged_series_group_is_left_out_with_a_warning(results_file, repeated, tmp_path):
    path = tmp_path / "damaged_series.h5"
    shutil.copyfile(results_file, path)
    victim = sorted(repeated.series)[0]
    with h5py.File(path, "r+") as f:
        f["series"][victim].attrs["cells"] = make_results._fixed_string("[not json")
    results = sa.load(path)
    assert victim not in set(results.series.series_id)
    assert len(results.series) == len(repeated.series) - 1
    assert results.problems[victim].startswith("series group unreadable")
    done = run_cli("analyze", str(path), check_rc=0)
    assert f"series {victim}: series group unreadable" in done.stderr


# --- analyze: the Repetitions table ----------------------------------------------------


def _interval(attrs, scale=1e3, fmt="{:,.3f}", prefix="median_s") -> str:
    names = (prefix, f"{prefix}_ci_low", f"{prefix}_ci_high")
    return repetitions_text.interval_text(*(_num(attrs[n]) * scale for n in names), fmt=fmt)


def _expected_lines(repeated) -> dict:
    """series id -> (label, reps, median text, throughput text, DISAGREE?) from the file."""
    results = sa.load(repeated.path)
    labels = dict(zip(results.series.series_id, results.series.label))
    out = {}
    for series_id, a in repeated.series.items():
        throughput = repetitions_text.interval_text(
            _num(a["throughput_samples_per_s"]),
            _num(a["throughput_ci_low"]),
            _num(a["throughput_ci_high"]),
            "{:,.1f}",
        )
        reps = f"{a['completed']}/{a['repetitions']}"
        out[series_id] = (labels[series_id], reps, _interval(a), throughput, bool(a["disagree"]))
    return out


def test_analyze_console_shows_each_series_with_its_interval(results_file, repeated):
    text = run_cli("analyze", results_file, check_rc=0).stdout
    section = text.split("== Repetitions", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()
    for label, reps, median, throughput, disagree in _expected_lines(repeated).values():
        (line,) = [x for x in lines if x.strip().startswith(label + " ")]
        assert reps in line and median in line and throughput in line
        assert line.rstrip().endswith("DISAGREE" if disagree else "yes")
        noted = [x for x in lines if x.startswith(f"  * DISAGREE: {label}:")]
        assert len(noted) == int(disagree)
    # The repetitions are rows of the cells table too, in order, with their own figures.
    cells = text.split("== Cells ==", 1)[1].split("\n\n", 1)[0]
    for ids in repeated.series_members().values():
        n = len(ids)
        rows = [x for x in cells.splitlines() if " rep " in x and f"/{n} " in x]
        assert len(rows) >= n


def test_analyze_markdown_summary_gives_figures_with_intervals(results_file, repeated):
    text = run_cli("analyze", results_file, "--format", "markdown", check_rc=0).stdout
    summary = text.split("## Repetitions: executive summary", 1)[1].split("\n## ", 1)[0]
    for label, reps, median, throughput, disagree in _expected_lines(repeated).values():
        (line,) = [x for x in summary.splitlines() if x.startswith(f"* **{label}**")]
        assert f"{median} ms" in line and f"{throughput} samples/s" in line
        assert f"over {reps} repetitions" in line
        assert ("**DISAGREE**" in line) == disagree
    assert "## Repetitions: median over the ok repetitions" in text


def test_analyze_json_repetitions_records(results_file, repeated):
    document = json.loads(run_cli("analyze", results_file, "--format", "json").stdout)
    records = {r["series_id"]: r for r in document["sections"]["repetitions"]}
    assert set(records) == set(repeated.series)
    for series_id, a in repeated.series.items():
        r = records[series_id]
        assert r["median_ms"] == pytest.approx(_num(a["median_s"]) * 1e3, rel=REL)
        for name in ("ci_low", "ci_high"):
            want = _num(a[f"median_s_{name}"]) * 1e3
            assert _num(r[f"{name}_ms"]) == pytest.approx(want, rel=REL, nan_ok=True)
            want = _num(a[f"throughput_{name}"])
            assert _num(r[f"throughput_{name}"]) == pytest.approx(want, rel=REL, nan_ok=True)
        assert r["disagree"] == ("DISAGREE" if a["disagree"] else "")
        assert r["reps"] == f"{a['completed']}/{a['repetitions']}"
        stored = [_num(m) for m in json.loads(a["repetition_median_s"])]
        assert [_num(m) for m in r["repetition_median_ms"]] == pytest.approx(
            [m * 1e3 for m in stored], rel=REL, nan_ok=True
        )
    cells = {r["cell_id"]: r for r in document["sections"]["cells"]}
    for series_id, ids in repeated.series_members().items():
        assert [cells[c]["repetition"] for c in ids] == list(range(len(ids)))
        assert {cells[c]["series_id"] for c in ids} == {series_id}


# --- compare -------------------------------------------------------------------------


def _series_of(repeated, metric: str) -> tuple[str, list]:
    """The synthetic file's one series of `metric` ("step" or "batch") and its cells."""
    (series_id,) = [s for s, a in repeated.series.items() if a["metric"] == metric]
    return series_id, json.loads(repeated.series[series_id]["cells"])


def _width(attrs) -> float:
    """high / low of a series' median interval (NaN without one)."""
    return _num(attrs["median_s_ci_high"]) / _num(attrs["median_s_ci_low"])


def _with_interval(repeated) -> list:
    """(series id, its cells, interval width) of the series with an interval, by id."""
    out = [
        (s, json.loads(a["cells"]), _width(a))
        for s, a in sorted(repeated.series.items())
        if np.isfinite(_width(a))
    ]
    if not out:
        pytest.skip("no series of the file has an interval (2 completed repetitions)")
    return out


def _changed(src, dst, factors: dict, failed=()) -> str:
    """`src` with the timings (and summaries) of the cells in `factors` scaled, the cells
    in `failed` marked failed, and `/series` recomputed from the cells (as the C++ writes it
    at the end of a run)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for cell_id, factor in factors.items():
            group = f["cells"][cell_id]
            group["timings"][...] = group["timings"][()] * factor
            make_results.write_summary(group)
        for cell_id in failed:  # as a cell that ended without results
            group = f["cells"][cell_id]
            group.attrs["status"] = make_results._fixed_string("failed")
            group.attrs["reason"] = make_results._fixed_string("forward: planted failure")
            for name in [n for n in group if n != "accuracy"]:
                del group[name]
    results_edits.rewrite_series(dst)
    return str(dst)


def _compare(base, new, *options, rc=None):
    done = run_cli("compare", base, new, "--format", "json", *options)
    if rc is not None:
        assert done.returncode == rc, done.stderr
    return done, json.loads(done.stdout)["sections"]["regressions"]


def _series_row(rows, series_id) -> dict:
    """The one row of a repeated cell (its repetitions are its runs, issue 40)."""
    (row,) = [r for r in rows if r["new_cell_id"] == series_id or r["base_cell_id"] == series_id]
    return row


def _log_p20(raw, ids) -> np.ndarray:
    """The logs of the judged figure of each ok repetition: the 20th percentile of its
    samples (Note [The judged statistic] in run_statistic.py)."""
    cells = [raw.cells[c] for c in ids if c in raw.cells and raw.cells[c].ok]
    return np.log([np.percentile(c.samples(), 20) for c in cells])


def test_a_slowdown_of_every_run_is_a_regression(results_file, repeated, tmp_path):
    """Every repetition of every series 1.5 x slower: one row per series (no row per
    repetition), a regression, its figures Welch's test on the logs of the runs' p20."""
    slow_ids = {c: 1.5 for _, ids, _ in _with_interval(repeated) for c in ids}
    slow = _changed(results_file, tmp_path / "slow.h5", slow_ids)
    done, rows = _compare(results_file, slow, rc=1)
    assert not [r for r in rows if " rep " in r["label"]]
    for series_id, ids, _ in _with_interval(repeated):
        row = _series_row(rows, series_id)
        assert row["verdict"] == "regression", row
        slow_raw = rawdata.read(slow)
        new = slow_raw.series[series_id]
        welch = stats.ttest_ind(_log_p20(slow_raw, ids), _log_p20(repeated, ids), equal_var=False)
        assert row["ratio"] == pytest.approx(1.5, rel=1e-9)
        assert row["p_value"] == pytest.approx(welch.pvalue, rel=1e-6)
        assert row["n_new"] == new["completed"] and row["new_status"].endswith(" ok")
        assert not [r for r in rows if r["new_cell_id"] in ids[1:]]


def test_a_change_within_the_run_to_run_noise_is_not_significant(results_file, repeated, tmp_path):
    """Each series with 3 or more runs that differ, slower by one standard error of the
    difference of the logs of its runs' p20 (t = 1): not significant, whatever the
    threshold (synthetic: the disagreeing training series, about 9 % slower)."""
    tried = 0
    for series_id, ids, _ in _with_interval(repeated):
        logs = _log_p20(repeated, ids)
        if logs.size < 3 or np.std(logs) == 0:
            continue
        factor = math.exp(np.std(logs, ddof=1) * math.sqrt(2.0 / logs.size))
        path = _changed(results_file, tmp_path / f"{series_id}.h5", {c: factor for c in ids})
        _, rows = _compare(results_file, path, "--threshold", "1%", rc=0)
        row = _series_row(rows, series_id)
        assert row["verdict"] == "not significant"
        assert row["ci_low"] <= 1.0 <= row["ci_high"] and row["p_value"] > 0.05
        assert row["ratio"] == pytest.approx(factor, rel=1e-9)
        tried += 1
    if not tried:
        pytest.skip("no series of 3 or more runs that differ")


def test_a_repetition_that_broke_fails_the_gate(results_file, repeated, tmp_path):
    """Without results (failed), and with them (an oom judged after its timed loop keeps its
    timings): the series' one row says broke, with how many runs did not complete."""
    series_id, ids, _ = max(_with_interval(repeated), key=lambda s: len(s[1]))
    if len(ids) < 4 or repeated.series[series_id]["completed"] < len(ids):
        pytest.skip("needs a series of 4 or more repetitions that all completed")
    broken = _changed(results_file, tmp_path / "broken.h5", {}, failed=[ids[1]])
    with h5py.File(broken, "r+") as f:  # keeps its datasets and summary
        f["cells"][ids[2]].attrs["status"] = make_results._fixed_string("oom")
    results_edits.rewrite_series(broken)
    done, rows = _compare(results_file, broken, rc=1)
    assert "1 broke" in done.stderr
    row = _series_row(rows, series_id)
    assert row["verdict"] == "broke"
    assert row["reason"] == f"2 of {len(ids)} new runs did not complete"
    assert row["new_status"] == f"{len(ids) - 2}/{len(ids)} ok"


def _single_run_of(repeated, series_id: str, path, per_sample_s: float) -> str:
    """A synthetic file without repeated cells plus one single run of the inference cell
    of `series_id` (its spec without `repetitions`), `per_sample_s` per sample."""
    make_results.write_results(path, repetitions=False)
    spec = dict(repeated.cells[series_id].spec)
    del spec["repetitions"], spec["cell_id"], spec["source"]
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    spec["source"], spec["cell_id"] = "single.yaml:1", f"{make_results.fnv1a64(canonical):016x}"
    rng = np.random.default_rng(5)
    timings, counts = make_results.infer_timings(rng, spec["batch_size"], 1, per_sample_s)
    with h5py.File(path, "r+") as f:
        make_results._write_cell(f["cells"], spec, "ok", rng, timings, counts)
        make_results.fix_strings(f)
    return spec["cell_id"]


@pytest.mark.parametrize("repeated_side", ["new", "base"])
def test_a_single_run_against_a_series(results_file, repeated, synthetic, tmp_path, repeated_side):
    """One side repeated, the other run once: one row, matched by spec, the ratio of the
    medians, and no verdict: the single side's run-to-run variation is unknown. The single
    run is 1.5x as fast as the series' runs (0.0003 s per sample in make_results)."""
    if not synthetic:
        pytest.skip("plants a single run of the synthetic inference series")
    series_id, ids = _series_of(repeated, "batch")
    single = _single_run_of(repeated, series_id, tmp_path / "single.h5", 0.0002)
    single_path = str(tmp_path / "single.h5")
    base, new = (single_path, results_file)
    if repeated_side == "base":
        base, new = new, base
    _, rows = _compare(base, new, rc=0)
    row = _series_row(rows, series_id)
    assert row["matched_by"] == "spec"
    single_side = "base" if repeated_side == "new" else "new"
    assert row[f"{single_side}_cell_id"] == single
    assert row["verdict"] == "inconclusive"
    assert row["reason"] == f"one run on the {single_side} side, run-to-run variation unknown"
    attrs = repeated.series[series_id]
    assert row[f"n_{repeated_side}"] == attrs["completed"] and row[f"n_{single_side}"] == 1
    assert row[f"median_{repeated_side}_s"] == pytest.approx(attrs["median_s"], rel=REL)
    assert not [r for r in rows if r is not row and single in (r["base_cell_id"], r["new_cell_id"])]


def test_the_file_against_itself(results_file, repeated):
    _, rows = _compare(results_file, results_file, rc=0)
    for series_id, attrs in repeated.series.items():
        row = _series_row(rows, series_id)
        if attrs["completed"] >= 2:
            assert row["verdict"] == "within threshold"  # equivalent: the interval is 1 itself
            assert row["ratio"] == pytest.approx(1.0) and row["p_value"] == 1.0


# --- the report ------------------------------------------------------------------------


def test_the_report_has_the_repetitions_section(results_file, repeated, tmp_path):
    out = tmp_path / "report.html"
    run_cli("report", results_file, "-o", str(out), check_rc=0)
    text = out.read_text()
    section = text.split('<h2 id="repetitions">Repetitions</h2>', 1)[1].split("<h2", 1)[0]
    assert "data:image/png;base64," in section
    assert "each repetition&#39;s median against the series median" in section
    for label, reps, median, _, disagree in _expected_lines(repeated).values():
        (row,) = [x for x in section.split("<tr") if f"<td>{label}</td>" in x]
        assert median in row and reps in row
        assert row.startswith(' class="disagree"') == disagree
    disagreeing = sum(bool(a["disagree"]) for a in repeated.series.values())
    assert f"<b>{disagreeing}</b>series disagree" in text
    assert text.count('<h2 id="repetitions">') == 1
    written = run_cli("analyze", results_file, "--plots", str(tmp_path / "png"), check_rc=0)
    assert (tmp_path / "png" / "repetitions.png").is_file(), written.stderr
