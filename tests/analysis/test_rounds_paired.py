"""Pairs of rounds (Note [Repetitions]: repetition k of every interleaved cell of a run runs
in round k, next to the others): when runs.rounds_paired judges two compared cells' runs as
pairs, and what the pairing changes in a judged row (pairs.judged_row through
verdict.judge). Stand-in results and units: the rule reads only the file's identity, the
units' specs and their runs' repetition indices."""

from __future__ import annotations

from types import SimpleNamespace

from scalebench_analysis.tables import runs


def _unit(repetitions=(0, 1, 2), interleave=True, prefix="a") -> runs.Unit:
    spec = {"repetitions": max(len(repetitions), 1), "interleave": interleave}
    unit = runs.Unit(prefix, prefix, spec, "train")
    for k in repetitions:
        cell_id = f"{prefix}{k}"
        unit.cells.append(cell_id)
        unit.statuses.append("ok")
        unit.rows[cell_id] = {"repetition": k, "median_s": 0.1}
    return unit


FILE = SimpleNamespace(source="results.h5")
BRANCH_VIEW = SimpleNamespace(source="results.h5")  # compare --branches' view of one file
OTHER_FILE = SimpleNamespace(source="other.h5")


def _paired(base_file, base, new_file, new) -> bool:
    return runs.rounds_paired(base_file, base, base.cells, new_file, new, new.cells)


def test_interleaved_repetitions_of_one_file_are_pairs():
    assert _paired(FILE, _unit(prefix="a"), BRANCH_VIEW, _unit(prefix="b"))
    assert _paired(FILE, _unit((0, 1), prefix="a"), FILE, _unit((0, 1), prefix="b"))


def test_two_files_are_two_runs_never_pairs():
    """Repetition k of two files ran at unrelated times: Welch's test over the runs."""
    assert not _paired(FILE, _unit(prefix="a"), OTHER_FILE, _unit(prefix="b"))
    unnamed = SimpleNamespace(source="")
    assert not _paired(unnamed, _unit(prefix="a"), SimpleNamespace(source=""), _unit(prefix="b"))


def test_a_missing_or_shifted_repetition_drops_the_pairing():
    """A failed repetition on one side leaves its partner without a pair: no pairing (the
    runs that remain are judged by Welch's test, none dropped)."""
    assert not _paired(FILE, _unit((0, 1, 2), prefix="a"), FILE, _unit((0, 2), prefix="b"))
    assert not _paired(FILE, _unit((0, 1), prefix="a"), FILE, _unit((1, 2), prefix="b"))


def test_cells_not_interleaved_or_not_repeated_are_not_pairs():
    """interleave: false runs one side's repetitions one after the other: run k of each
    side did not run in one round. One run a side is not a test at all."""
    assert not _paired(FILE, _unit(interleave=False, prefix="a"), FILE, _unit(prefix="b"))
    assert not _paired(FILE, _unit((0,), prefix="a"), FILE, _unit((0,), prefix="b"))
