"""The runs of a compared cell (Note [Runs are the unit of evidence] in verdict.py): a cell
that is not repeated is one run; a repeated cell (`repetitions: N`, Note [Repetitions]) is
one *unit* whose runs are its repetitions, compared as one row.

A unit is keyed by its series id (the cell id of repetition 0; a cell's own id when it is
not repeated) and labelled by its cell's label without " rep k/N". Its run figure is each
ok run's summary `median_s` (step time for training, batch time for inference; a program
cell's summarised phase likewise), and a phase's run figure is the median over the run's
measured iterations of that phase (quality.iteration_samples: the slowest rank per
iteration for training, every rank's batches for inference).

Units of two sides are matched (`match_units`) by id, else by their spec without the
fields of MATCH_DROP and those the caller adds (the commit between files; branch and
commit between branches), when that spec is unique on both sides: a series of 5 and a
single run of the same cell are the same cell measured with 5 runs and with 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.keys import config_key
from ..read.loader import Results
from . import verdict
from .quality import iteration_samples, summarised_phase

#: Spec fields that do not separate two units: which run of a cell, and how many.
MATCH_DROP = ("repetition", "repetitions", "interleave")
BROKEN_STATUSES = ("failed", "oom", "timeout")


@dataclass
class Unit:
    """One compared cell: its id (series id or cell id), label, reference spec and mode,
    and its runs' cell ids, statuses and rows of Results.cells in repetition order."""

    unit_id: str
    label: str
    spec: dict
    mode: str
    cells: list = field(default_factory=list)
    statuses: list = field(default_factory=list)
    rows: dict = field(default_factory=dict)  # cell id -> its row of Results.cells

    @property
    def repeated(self) -> bool:
        return len(self.cells) > 1 or int(self.spec.get("repetitions", 1)) > 1

    def status_text(self) -> str:
        """ "ok" / "failed" of a single run, "2/3 ok" of a repeated cell."""
        if not self.repeated:
            return self.statuses[0]
        ok = sum(s == "ok" for s in self.statuses)
        return f"{ok}/{len(self.statuses)} ok"


def units_of(results: Results, keep=None) -> dict:
    """unit id -> Unit of every cell of `results` (of the cells for which `keep(cell row)`
    holds, when given), in the file's cell order. A repetition whose series id is unknown
    (its repetition 0 missing from a file without `/series`) is a unit of its own."""
    out: dict = {}
    cells = results.cells
    ids = cells["series_id"] if "series_id" in cells else cells["cell_id"]
    for (_, cell), unit_id in zip(cells.iterrows(), ids):
        if keep is not None and not keep(cell):
            continue
        unit_id = unit_id if isinstance(unit_id, str) and unit_id else cell["cell_id"]
        unit = out.get(unit_id)
        if unit is None:
            label = str(cell["label"]).split(" rep ")[0]
            unit = out[unit_id] = Unit(unit_id, label, cell["spec"], cell["mode"])
        if int(cell.get("repetition", 0) or 0) == 0:
            unit.spec = cell["spec"]
        unit.cells.append(cell["cell_id"])
        unit.statuses.append(cell["status"])
        unit.rows[cell["cell_id"]] = cell
    return out


def match_key(spec: dict, drop: tuple = ()) -> str:
    """The spec two units must share to be matched (module doc)."""
    return config_key(spec, drop=MATCH_DROP + tuple(drop))


def match_units(base: dict, new: dict, drop: tuple) -> list:
    """(base unit id | None, new unit id | None, matched_by) for every unit of either side:
    matched_by "id", "spec" (unique on both sides) or "" (unmatched)."""
    pairs = [(u, u, "id") for u in base if u in new]
    done = {u for u, _, _ in pairs}
    by_key_base, by_key_new = {}, {}
    for u, unit in base.items():
        if u not in done:
            by_key_base.setdefault(match_key(unit.spec, drop), []).append(u)
    for u, unit in new.items():
        if u not in done:
            by_key_new.setdefault(match_key(unit.spec, drop), []).append(u)
    for key, ids in by_key_base.items():
        if len(ids) == 1 and len(by_key_new.get(key, [])) == 1:
            pairs.append((ids[0], by_key_new[key][0], "spec"))
    paired_base = {b for b, _, _ in pairs}
    paired_new = {n for _, n, _ in pairs}
    pairs += [(u, None, "") for u in base if u not in paired_base]
    pairs += [(None, u, "") for u in new if u not in paired_new]
    return pairs


def ok_runs(unit: Unit) -> list:
    """Cell ids of the unit's ok runs with a finite summary `median_s`."""
    out = []
    for cell_id, status in zip(unit.cells, unit.statuses):
        median = unit.rows[cell_id].get("median_s", math.nan)
        if status == "ok" and median is not None and np.isfinite(median):
            out.append(cell_id)
    return out


def _repetition(unit: Unit, cell_id: str) -> int:
    return int(unit.rows[cell_id].get("repetition", 0) or 0)


def _one_run_of_the_tool(a: Results, b: Results) -> bool:
    """True when `a` and `b` are one results file (or views of it, as compare --branches
    makes): two files are two runs, even of one matrix."""
    return a is b or (bool(a.source) and a.source == b.source)


def rounds_paired(
    base: Results, base_unit: Unit, base_cells: list, new: Results, new_unit: Unit, new_cells: list
) -> bool:
    """True when the two units' ok runs are pairs of rounds (Note [Repetitions]: repetition
    k of every interleaved cell of a run ran in round k, next to each other): both units
    of one results file, both interleaved, and their ok runs (`base_cells`, `new_cells`, in
    repetition order) the same repetitions, 2 or more. Then verdict.judge pairs run k with
    run k. Runs of two files, or with a repetition missing on one side, are not pairs."""
    if not _one_run_of_the_tool(base, new):
        return False
    if len(base_cells) < 2 or len(base_cells) != len(new_cells):
        return False
    for unit in (base_unit, new_unit):
        if not unit.repeated or not bool(unit.spec.get("interleave", True)):
            return False
    base_rounds = [_repetition(base_unit, c) for c in base_cells]
    return base_rounds == [_repetition(new_unit, c) for c in new_cells]


def run_figures(unit: Unit, cell_ids: list, column: str = "median_s") -> list:
    """The `column` of each run (its summary `median_s` by default)."""
    return [float(unit.rows[c].get(column, math.nan)) for c in cell_ids]


def broken_runs(unit: Unit) -> int:
    """Runs of the unit that failed, ran out of memory or timed out."""
    return sum(s in BROKEN_STATUSES for s in unit.statuses)


def trust_reasons(trust: pd.DataFrame) -> dict:
    """cell id -> its untrusted_because ("" when trusted; quality.trust_table)."""
    pairs = zip(trust.cell_id, trust.untrusted_because)
    return {c: r if isinstance(r, str) else "" for c, r in pairs}


def phase_names(
    results: Results, base_cells: list, other: Results, new_cells: list, mode: str
) -> list:
    """The phases every run of both sides timed, in the first run's order, without the
    summarised phase (the step or batch itself: the cell's own verdict)."""
    if not base_cells or not new_cells:
        return []
    names = list(results.phases(base_cells[0]))
    for source, cells in ((results, base_cells), (other, new_cells)):
        for cell_id in cells:
            have = set(source.phases(cell_id))
            names = [n for n in names if n in have]
    return [n for n in names if n != summarised_phase(mode)]


def phase_medians(results: Results, cell_ids: list, phase: str, mode: str) -> list:
    """Per run: the median over its measured iterations of `phase` (module doc)."""
    out = []
    for cell_id in cell_ids:
        samples = iteration_samples(results, cell_id, mode, phase)
        out.append(float(np.median(samples)) if samples.size else math.nan)
    return out


def phase_changes(
    base: Results,
    base_cells: list,
    new: Results,
    new_cells: list,
    alpha: float,
    mode: str,
    pairs: bool = False,
) -> list:
    """(phase, verdict.phase_change) of every phase both sides timed (runs of `mode`);
    `pairs`: run k of one side paired with run k of the other (rounds_paired)."""
    return [
        (
            phase,
            verdict.phase_change(
                phase_medians(base, base_cells, phase, mode),
                phase_medians(new, new_cells, phase, mode),
                alpha,
                pairs,
            ),
        )
        for phase in phase_names(base, base_cells, new, new_cells, mode)
    ]
