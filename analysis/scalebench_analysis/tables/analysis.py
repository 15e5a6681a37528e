"""One call that runs every analysis of a results file and returns named tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.keys import IDENTITY_COLUMNS
from ..read.loader import Results, load
from . import (
    ablation,
    accuracy,
    batch,
    compare,
    mfu,
    quality,
    repetitions,
    scaling,
    segments,
    startup,
    straggler_nodes,
)


@dataclass(frozen=True)
class AnalysisOptions:
    quality: quality.QualityOptions = quality.QualityOptions()
    slo_p99_ms: float | None = None
    baseline: tuple[str, str] | None = None  # (spec field, value), e.g. ("branch", "main")
    baseline_file: str | None = None
    gate: compare.GateOptions = compare.GateOptions()
    ablation: bool = False  # the ablation tables and recommendations (ablation.py)
    peak_flops: str | None = None  # the user's peak FLOP/s table, added to mfu.py's


@dataclass
class Analysis:
    """Every table of one results file. `sections` is ordered: overview, cells,
    repetitions (only when the file has `/series`: repetitions.repetitions_table), scaling,
    batch, batch_study and batch_curve (only when the file has a batch study: an auto
    cell or a listed-batch group, batch.py Note [Batch study]), stragglers, straggler_nodes
    (only when a cell's ranks ran on 2+ hosts: straggler_nodes.py), startup (cells
    with start-up figures: startup.py), segments (program cells: where the program's wall time
    went, segments.py), mfu (cells whose model FLOPs are known: mfu.py),
    accuracy
    (only when a cell has an accuracy group), then the ablation tables and speedup /
    regressions and phases (compare.compare_tables) when asked for."""

    results: Results
    options: AnalysisOptions
    sections: dict = field(default_factory=dict)
    batch_points: pd.DataFrame | None = None
    batch_studies: pd.DataFrame | None = None  # batch.batch_study: one row per study
    batch_curve: pd.DataFrame | None = None  # batch.batch_study: one row per probe / cell
    trust: pd.DataFrame | None = None
    baseline: Results | None = None

    @property
    def regression_gate_failed(self) -> bool:
        table = self.sections.get("regressions")
        return table is not None and compare.gate_failed(table)


def overview_table(results: Results) -> pd.DataFrame:
    meta = results.meta
    counts = results.cells.status.value_counts()
    rows = [
        ("file", results.path),
        ("layout_version", results.layout_version),
        (
            "tool",
            f"scalebench {meta.get('tool_version', '?')} "
            f"{meta.get('tool_commit', '')[:12]}" + (" (dirty)" if meta.get("tool_dirty") else ""),
        ),
        ("started", meta.get("start_time", "")),
        ("finished", meta.get("end_time", "") or "(not finished)"),
        ("hosts", ", ".join(meta.get("hosts") or [])),
        ("cells", ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"),
    ]
    versions = [
        f"{k[:-8]} {meta[k]}"
        for k in ("torch_version", "cuda_version", "nccl_version", "mpi_version", "hdf5_version")
        if meta.get(k)
    ]
    rows.append(("libraries", ", ".join(versions)))
    # Since layout 1.6: the matrix's warnings (a CytoDL task file of built-in stand-ins).
    rows += [("warning", str(w)) for w in meta.get("matrix_warnings") or []]
    return pd.DataFrame(rows, columns=["field", "value"])


#: The cells table's columns after its console ones: every statistic of the cell's stored
#: `summary` (schemas/results-layout.md; seconds, as stored, NaN where the file has none),
#: then its start-up figures (startup.startup_table: medians over ranks), for `--format
#: csv|json` (machine-only: output/render.py leaves them out of the console).
STATISTICS = (
    "median_s",
    "mean_s",
    "std_s",
    "min_s",
    "max_s",
    "p50_s",
    "p90_s",
    "p95_s",
    "p99_s",
    "median_ci_low_s",
    "median_ci_high_s",
    "warmup_reason",
    "energy_j",
    "samples_per_joule",
    "peak_memory_bytes",
    *startup.FIGURES,
)


def cells_table(
    results: Results,
    trust: pd.DataFrame,
    scale: pd.DataFrame,
    started: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per cell: status, throughput, latency, noise and trust, accuracy (see
    accuracy.text), comm share; then STATISTICS, the start-up figures from `started`
    (startup.startup_table)."""
    cells = results.cells.drop(columns=["count", "cv"], errors="ignore")
    if started is not None and len(started):
        cells = cells.merge(started[["cell_id", *startup.FIGURES]], on="cell_id", how="left")
    cells = cells.merge(trust, on="cell_id", how="left")
    if "comm_share" in scale:
        cells = cells.merge(scale[["cell_id", "comm_share"]], on="cell_id", how="left")
    for column in (
        "throughput_samples_per_s",
        "median_s",
        "p99_s",
        "peak_memory_bytes",
        "comm_share",
        "reason",
    ):
        if column not in cells:
            cells[column] = np.nan if column != "reason" else ""
    cells["median_ms"] = cells.median_s * 1e3
    # Note [Iterations auto]: +- of the median's 95 % interval (layout 1.8), and why the
    # measured loop stopped.
    cells["ci_rel"] = quality.interval_rel_column(cells)
    if "stop_reason" not in cells:
        cells["stop_reason"] = ""
    # Since layout 1.8, `warmup: auto` cells only: "" elsewhere, as stop_reason is before 1.8.
    cells["warmup_reason"] = cells.get("warmup_reason", pd.Series("", index=cells.index))
    cells["warmup_reason"] = cells.warmup_reason.fillna("")
    cells["p99_ms"] = cells.p99_s * 1e3
    cells["peak_memory_mib"] = cells.peak_memory_bytes / 2**20
    cells["accuracy"] = accuracy.column(cells)
    columns = [
        "label",
        "cell_id",
        *IDENTITY_COLUMNS,
        "status",
        "throughput_samples_per_s",
        "median_ms",
        "p99_ms",
        "count",
        "cv",
        "ci_rel",
        "stop_reason",
        "drift",
        "trusted",
        "untrusted_because",
        "accuracy",
        "comm_share",
        "peak_memory_mib",
        "reason",
        *STATISTICS,
        "repetition",
        "repetitions",
        "series_id",
    ]
    return cells.reindex(columns=columns)


def analyze(results: Results | str, options: AnalysisOptions = AnalysisOptions()) -> Analysis:
    """Runs every analysis. `results` is a loaded file or a path."""
    if not isinstance(results, Results):
        results = load(results)
    trust = quality.trust_table(results, options.quality)
    scale = scaling.scaling_table(results, trust)
    points = batch.batch_points(results, trust)
    out = Analysis(results=results, options=options, batch_points=points, trust=trust)
    out.sections["overview"] = overview_table(results)
    started = startup.startup_table(results)
    out.sections["cells"] = cells_table(results, trust, scale, started)
    repeated = repetitions.repetitions_table(results.series, results.cells)
    if len(repeated):  # Note [Repetitions]
        out.sections["repetitions"] = repeated
    out.sections["scaling"] = scale
    out.sections["batch"] = batch.batch_table(points, options.slo_p99_ms)
    out.batch_studies, out.batch_curve = batch.batch_study(results, points, options.slo_p99_ms)
    if len(out.batch_studies):
        out.sections["batch_study"] = out.batch_studies
        out.sections["batch_curve"] = out.batch_curve
    ranks = quality.straggler_table(results, options.quality)
    out.sections["stragglers"] = ranks
    nodes = straggler_nodes.straggler_node_table(ranks, options.quality.straggler_threshold)
    if len(nodes):
        out.sections["straggler_nodes"] = nodes
    if len(started):
        out.sections["startup"] = started
    spans = segments.segments_table(results)
    if len(spans):  # Note [Run-level segments]
        out.sections["segments"] = spans
    utilisation = mfu.mfu_table(results, mfu.load_peaks(options.peak_flops))
    if len(utilisation):
        out.sections["mfu"] = utilisation
    checked = accuracy.accuracy_table(results.cells)
    if len(checked):
        out.sections["accuracy"] = checked
    if options.ablation:
        criteria = ablation.Criteria(options.gate.threshold, options.gate.alpha)
        out.sections.update(ablation.ablation_tables(results.cells, trust, criteria))
    if options.baseline is not None:
        field_name, value = options.baseline
        out.sections["speedup"] = compare.speedup_in_file(
            results, field_name, value, trust, options.gate
        )
    if options.baseline_file is not None:
        base = load(options.baseline_file)
        base_trust = quality.trust_table(base, options.quality)
        out.baseline = base
        out.sections["speedup_vs_file"] = compare.speedup_between_files(
            base, results, base_trust, trust, options.gate
        )
        regressions, phases = compare.compare_tables(
            base, results, options.gate, quality_options=options.quality
        )
        out.sections["regressions"] = regressions
        out.sections["phases"] = phases
    return out
