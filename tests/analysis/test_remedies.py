"""Every remedy a comparison prints is one the tool accepts for that cell's kind and one
that addresses the cause (tables/remedies.py; issue 54 row 2, issue 52 deliver 3): walked
over compare's regressions and the speedup tables of synthetic files, built-in and
program cells, quiet and with every run made noisy or drifting.

The rules checked on each setting a remedy names in backticks:

* a known setting (`repetitions`, `iterations`, `warmup`, `ci_width`, `max_seconds`,
  `max_iterations`), or the command `scalebench run --resume`;
* a program cell (spec `program.command`) gets numbers: never `iterations: auto` or
  `warmup: auto` (matrix/expand.cc refuses them), nor the auto-only `ci_width`,
  `max_seconds`, `max_iterations`;
* `repetitions: N` is more than every compared cell already had; a `repetitions: auto`
  cell is offered `max_repetitions: N` above its cap, never a fixed count;
* more runs when the spread between runs dominates, longer runs only when the spread
  within runs does (checked on rows built with each spread dominating).
"""

from __future__ import annotations

import json
import re
import shutil

import h5py
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables import compare, pairs, quality, remedies, verdict

import make_results
import results_edits
from make_results import _text_attr, fix_strings

SETTINGS = {
    "repetitions",
    "max_repetitions",
    "iterations",
    "warmup",
    "ci_width",
    "max_seconds",
    "max_iterations",
}
AUTO_ONLY = {"ci_width", "max_seconds", "max_iterations"}
COMMANDS = {"scalebench run --resume"}
QUALITY = {
    "default": quality.QualityOptions(),
    "noisy": quality.QualityOptions(max_cv=0.001),
    "drifting": quality.QualityOptions(max_drift=0.001),
}


def _as_program(src, dst) -> str:
    """A copy of `src` whose every cell is a program cell (its spec's `program.command`
    set, as a program experiment's cells have it)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for cell in f["cells"].values():
            spec = json.loads(_text_attr(cell, "spec"))
            spec["program"] = {"command": ["python", "train.py", "--steps", "{steps}"], "env": {}}
            cell.attrs["spec"] = json.dumps(spec)
        fix_strings(f)
    return str(dst)


@pytest.fixture(scope="module")
def file_pairs(tmp_path_factory):
    """(kind, base, new): built-in and program files, new with a small delay in forward of
    the repeated inference cell (+2 %: undecided) and a large one (+9 %)."""
    work = tmp_path_factory.mktemp("remedies")
    base = make_results.write_results(work / "base.h5", repetitions=True)
    series_id = results_edits.repeated_series_ids()[1]
    loaded = sa.load(base)
    (cells,) = [r.cells for r in loaded.series.itertuples() if r.series_id == series_id]
    out = []
    for name, delay_s in (("small", 0.0001), ("large", 0.0005)):
        new = results_edits.copy_with_phase_delay(
            base, work / f"{name}.h5", cells, "forward", delay_s
        )
        out.append(("built-in", base, new))
        out.append(
            (
                "program",
                _as_program(base, work / f"program-base-{name}.h5"),
                _as_program(new, work / f"program-{name}.h5"),
            )
        )
    return out


def _specs(results, unit_id: str) -> list:
    cells = results.cells
    ids = cells["series_id"] if "series_id" in cells else cells["cell_id"]
    return [spec for spec, c, s in zip(cells.spec, cells.cell_id, ids) if unit_id in (c, s)]


def _check(remedy: str, specs: list) -> None:
    """Asserts the module doc's rules for one remedy text and the specs of its cells."""
    settings = remedies.Settings.of(*specs)
    named = re.findall(r"`([^`]+)`", remedy)
    assert named or remedy.startswith("check the data-parallel"), remedy
    for text in named:
        if text in COMMANDS:
            continue
        key, _, value = (part.strip() for part in text.partition(":"))
        assert key in SETTINGS, (key, remedy)
        if settings.program:
            assert value != "auto" and key not in AUTO_ONLY, (text, remedy)
        if key == "repetitions" and value == "auto":
            assert settings.repetitions_auto, (text, remedy)  # "let it run on": its own
        elif key == "repetitions":
            assert not settings.repetitions_auto, (text, remedy)
            assert int(value) > settings.repetitions, (text, settings, remedy)
        if key == "max_repetitions":
            assert settings.repetitions_auto and int(value) > settings.repetitions, (text, remedy)
        if value and value != "auto":
            assert int(value) > 0, (text, remedy)


def test_every_remedy_fits_the_cells_kind(file_pairs):
    walked, kinds = 0, set()
    for kind, base, new in file_pairs:
        b, n = sa.load(base), sa.load(new)
        for name, options in QUALITY.items():
            table, _ = sa.compare_tables(b, n, sa.GateOptions(), quality_options=options)
            trust_b, trust_n = quality.trust_table(b, options), quality.trust_table(n, options)
            speedup = compare.speedup_between_files(b, n, trust_b, trust_n)
            rows = table.to_dict("records") + [
                {**r, "base_cell_id": r["baseline_cell_id"], "new_cell_id": r["cell_id"]}
                for r in speedup.to_dict("records")
            ]
            for row in rows:
                remedy = row.get("remedy")
                if not isinstance(remedy, str) or not remedy:
                    continue
                specs = _specs(b, row["base_cell_id"]) + _specs(n, row["new_cell_id"])
                assert specs, row["label"]
                for piece in remedy.split("; "):
                    _check(piece, specs)
                walked += 1
                kinds.add((kind, name))
            lines = [x for x in pairs.verdict_notes(table) if "remedy: " in x]
            assert all("iterations: auto" not in x for x in lines) or kind == "built-in"
    assert walked > 50
    assert kinds == {(k, q) for k in ("built-in", "program") for q in QUALITY}


def _undecided_row(between: float, within: float, reason: str = "cv 30.0% > 10%") -> dict:
    row = {
        "verdict": verdict.INCONCLUSIVE,
        "noise_undecided": True,
        "reason": reason,
        "remedy": "",
        "paired": False,
        "spread_for_runs": between,
        "spread_between": between,
        "spread_within": within,
        "phase_changes": [],
        "settings": remedies.Settings(program=True, repetitions=3, iterations=50, warmup=5),
    }
    pairs.finish(row, 0.05, 0.05)
    return row


def test_the_remedy_follows_the_spread_that_dominates():
    """Between-run spread 8 %, each run's p20 known to 1 %: more runs (beyond the 3 the
    cells had); between-run spread 2 %, each run's p20 known to 3 %: longer runs (a number,
    for a program cell); a warm-up drift adds more warm-up, as a number."""
    between = _undecided_row(0.08, 0.01)
    assert between["remedy"].startswith("run each side ") and "`repetitions: " in between["remedy"]
    assert int(re.search(r"`repetitions: (\d+)`", between["remedy"]).group(1)) > 3
    assert "iterations" not in between["remedy"]
    within = _undecided_row(0.02, 0.03)
    assert (
        within["remedy"]
        == "longer runs (`iterations: 200`, a number: a program cell runs its own loop)"
    )
    drift = _undecided_row(0.02, 0.03, "warm-up drift +14.0% (|drift| > 10%)")
    assert "`warmup: 10`" in drift["remedy"] and "auto" not in drift["remedy"]
    assert remedies.more_runs(3, remedies.Settings(repetitions=3)).count("`repetitions: 4`") == 1
    auto = remedies.Settings(repetitions=20, repetitions_auto=True)
    assert remedies.more_runs(40, auto) == (
        "let `repetitions: auto` run on to 40 rounds (`max_repetitions: 40`)"
    )
    _check(remedies.more_runs(3, auto), [{"repetitions": 20, "repetitions_auto": True}])
    built_in = remedies.Settings(iterations=50, warmup=5)
    assert "`iterations: auto`" in remedies.more_iterations(built_in)
    assert "`warmup: auto`" in remedies.more_warmup(built_in)
