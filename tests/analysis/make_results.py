"""A writer of synthetic scalebench results files that follows schemas/results-layout.md.

Used when no real results file is given (SCALEBENCH_RESULTS_FILE unset). It writes the
layout exactly as the C++ writer does (test_summary.py checks it against the C++ layout
golden tests/data/results/layout_v1.txt): root provenance attributes, one group per cell
with the spec copies, status, timings (rank x iteration x phase, NaN-padded), per-rank
metrics, hosts and devices, and the `summary` subgroup computed from the timings with
the rules of results/cell_summary.cc and the thresholds of
results/cell_summary.h (read from the header). That second implementation of the
summary lives with the test helpers only (reference_figures.py): the analysis package reads
the summary from the file. Timings are drawn from a seeded numpy RNG.

The synthetic matrix: branches main and feature (feature ~15% faster), train and infer,
per-rank batch 16 and 32, world sizes 1 and 2, plus a bf16 setting, an oom, a failed and
a skipped cell, one straggler rank, one noisy cell and one cell with warm-up drift. When
the layout golden has an `accuracy` group (layout 1.3), the ok training cells of 2 ranks
get a passed one; `add_accuracy` plants a chosen group into any cell of a written file.
Layout 1.5 repetitions (results_edits.add_repetitions): a training cell of 5 repetitions
that disagree (one runs 25 % slower) and an inference cell of 3 that agree, with their
`/series` groups.

Its parts: reference_figures.py (the summary, batch and series figures the C++ computes,
again in numpy), synthetic_cells.py (the cells' specs, seeded timings and batch searches),
results_edits.py (repetitions added, slowed or renamed copies of a written file).

Run as a script to write a file: python make_results.py out.h5
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import h5py
import numpy as np

from reference_figures import PROBE_COLUMNS, REPO, _metric, batch_figures, cpp_constant, summary_of
from synthetic_cells import (
    INFER_PHASES,
    MEASURED,
    RANK_METRICS,
    TRAIN_PHASES,
    WARMUP,
    fnv1a64,
    infer_timings,
    make_spec,
    memory_bound_search,
    plateau_search,
    train_timings,
)

#: The layout version written: kResultsLayoutVersion of results/store.h.
LAYOUT_VERSION = cpp_constant("results/store.h", "kResultsLayoutVersion")


def _probe_figures(group: h5py.Group, spec: dict, metrics, names) -> dict | None:
    """The batch figures of a cell with `probes` (None without)."""
    if "probes" not in group:
        return None
    status = json.loads(group["probes"].attrs["status"])
    budget = float(np.min(_metric(metrics, names, "memory_budget_bytes")))
    return batch_figures(
        group["probes"][()],
        status,
        budget,
        spec.get("safety_margin", 0.1),
        spec.get("latency_slo_ms", 0.0),
    )


def write_summary(group: h5py.Group) -> None:
    """(Re)writes `group/summary` from the group's timings, rank_metrics and probes."""
    timings = group["timings"][()]
    phases = json.loads(group["timings"].attrs["phases"])
    names = json.loads(group["rank_metrics"].attrs["names"])
    metrics = group["rank_metrics"][()]
    a = group.attrs
    spec = json.loads(a["spec"])
    batch = int(a["batch_size"])
    if batch == 0:  # batch_size auto: the batch the search chose (rank 0's metric)
        batch = int(_metric(metrics, names, "batch_size")[0])
    summary = summary_of(
        timings,
        phases,
        int(group["timings"].attrs["warmup_iterations"]),
        a["mode"].decode() if isinstance(a["mode"], bytes) else a["mode"],
        batch,
        int(a["world_size"]),
        int(a["samples"]),
        int(a["measured_iterations"]),
        metrics,
        names,
        _probe_figures(group, spec, metrics, names),
    )
    if "summary" in group:
        del group["summary"]
    sub = group.create_group("summary")
    for key, value in summary.items():
        if isinstance(value, str):
            sub.attrs[key] = _fixed_string(value)
        else:
            sub.attrs[key] = value if isinstance(value, np.integer) else np.float64(value)


def cpp_timings_layout(shape) -> dict:
    """create_dataset keywords that store `timings` of `shape` as the C++ writer does
    (results/cells.cc): one chunk per rank of at most 1 MiB, shuffle + gzip level 4.
    _write_cell's default is h5py's automatic chunking with gzip alone."""
    rows = min(shape[1], max(1, (1 << 20) // (8 * shape[2])))
    return {
        "chunks": (1, rows, shape[2]),
        "shuffle": True,
        "compression": "gzip",
        "compression_opts": 4,
    }


def _write_cell(
    cells,
    spec,
    status,
    rng,
    timings=None,
    counts=None,
    reason="",
    layout=None,
    auto=None,
    hosts=None,
):
    """One cell group; `auto` (AutoCell) for a `batch_size: auto` cell: its probes, and the
    per-rank metrics of the search (`batch_size`, `memory_budget_bytes`, `batch_search_s`).
    `hosts`: each rank's host (default: two ranks a node, node0, node0, node1, ...)."""
    g = cells.create_group(spec["cell_id"])
    g.attrs["spec"] = json.dumps(spec)
    for key in ("branch", "commit", "experiment", "mode", "precision", "device", "backend"):
        g.attrs[key] = spec[key]
    g.attrs["model"] = spec["model"]["zoo"]
    g.attrs["commit_date"] = "2025-12-31T12:00:00+00:00"
    g.attrs["dirty"] = np.int8(0)
    for key in (
        "batch_size",
        "world_size",
        "warmup_iterations",
        "measured_iterations",
        "samples",
        "seed",
    ):
        g.attrs[key] = np.int64(spec[key])
    g.attrs["status"] = status
    g.attrs["failed_phase"] = "" if status in ("ok", "skipped", "running") else "forward"
    g.attrs["reason"] = reason
    index = len(cells) - 1
    started, finished = _cell_times(index)
    g.attrs["started_at"] = "" if status == "skipped" else started
    g.attrs["finished_at"] = "" if status in ("skipped", "running") else finished
    world = spec["world_size"]
    g.attrs["ranks"] = json.dumps([] if status == "skipped" else list(range(1, world + 1)))
    if timings is None:
        return
    phases = TRAIN_PHASES if spec["mode"] == "train" else INFER_PHASES
    layout = layout or {"chunks": True, "compression": "gzip"}
    d = g.create_dataset("timings", data=timings, **layout)
    d.attrs["phases"] = json.dumps(phases)
    d.attrs["warmup_iterations"] = np.int64(WARMUP)
    d.attrs["iterations_per_rank"] = json.dumps(counts)
    # Layout 1.5: when each phase began (Note [Shared cell clock]), DDP buckets.
    starts = phase_starts_of(timings)
    s = g.create_dataset("phase_starts", data=starts, **layout)
    s.attrs["phases"] = json.dumps(phases)
    if spec["mode"] == "train" and world > 1:
        write_bucket_times(g, timings, starts)
    batch = auto.recommended_batch if auto else spec["batch_size"]
    names = RANK_METRICS + (AUTO_RANK_METRICS if auto else []) + TIMELINE_RANK_METRICS
    metrics = np.full((world, len(names)), np.nan)
    metrics[:, 0] = 2.3 + rng.normal(0, 0.01)
    metrics[:, 1] = 1234.5678
    metrics[:, 2] = 0.05
    metrics[:, 3] = timings[:, 0, -1]
    metrics[:, 4] = 2.0e8 + batch * 1.0e6 + np.arange(world) * 1.0e6
    metrics[:, 5] = 50_000
    metrics[:, 6] = [batch * (c - WARMUP) for c in counts]
    metrics[:, 7] = np.nansum(timings[:, WARMUP:, -1], axis=1)
    if spec["mode"] == "infer":
        metrics[:, 0] = np.nan
    metrics[:, -1] = _cell_origin(index) + 0.0001 * np.arange(world)  # loop_origin_epoch_s
    if auto:
        metrics[:, len(RANK_METRICS)] = batch
        metrics[:, len(RANK_METRICS) + 1] = auto.budget_bytes
        metrics[:, len(RANK_METRICS) + 2] = 1.5
        write_probes(g, auto.probes, auto.status, auto.times)
    m = g.create_dataset("rank_metrics", data=metrics)
    m.attrs["names"] = json.dumps(names)
    hosts = list(hosts) if hosts is not None else [f"node{r // 2}" for r in range(world)]
    g.create_dataset("rank_hosts", data=hosts, dtype=h5py.string_dtype("utf-8"))
    g.create_dataset("rank_devices", data=["cpu"] * world, dtype=h5py.string_dtype("utf-8"))
    write_summary(g)


#: Per-rank metrics of every cell with timings since layout 1.5 (after the others).
TIMELINE_RANK_METRICS = ["loop_origin_epoch_s"]
#: The synthetic run's cells start here (2026-01-01T00:00:00Z), one every 2 minutes.
ORIGIN_EPOCH_S = 1767225600.0
#: Gradient buckets of the synthetic DDP cells (bytes), in launch order.
BUCKET_BYTES = [1 << 20, 3 << 20]


def _iso_ms(epoch_s: float) -> str:
    """ISO 8601 UTC with milliseconds, as the C++ writes times since layout 1.5."""
    moment = datetime.fromtimestamp(epoch_s, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _cell_origin(index: int) -> float:
    """The synthetic run places cell `index` (file order) 2 minutes after the previous."""
    return ORIGIN_EPOCH_S + 120.0 * index


def _cell_times(index: int) -> tuple[str, str]:
    """`started_at` / `finished_at` of cell `index`: dispatched 0.25 s before its origin,
    its result in 60 s later (every synthetic cell is shorter)."""
    origin = _cell_origin(index)
    return _iso_ms(origin - 0.25), _iso_ms(origin + 60.0)


def phase_starts_of(timings: np.ndarray) -> np.ndarray:
    """Begin times consistent with `timings` as the C++ timer records them: iterations follow
    each other 50 us apart from a 0.01 s origin, the phases run back to back inside their
    iteration (the last phase spans it); NaN where the timing is NaN."""
    world, rows, phases = timings.shape
    starts = np.full(timings.shape, np.nan)
    for r in range(world):
        t = 0.01
        for i in range(rows):
            if np.isnan(timings[r, i, -1]):
                continue
            starts[r, i, -1] = t
            inner = t
            for p in range(phases - 1):
                starts[r, i, p] = inner
                inner += timings[r, i, p]
            t += timings[r, i, -1] + 50e-6
    return starts


def write_bucket_times(group, timings: np.ndarray, starts: np.ndarray) -> None:
    """`bucket_times` (world, rows, buckets, 2): each bucket launched during backward and
    completed by the end of comm_wait, as the MPI backend records them."""
    backward, comm_wait = TRAIN_PHASES.index("backward"), TRAIN_PHASES.index("comm_wait")
    world, rows, _ = timings.shape
    values = np.full((world, rows, len(BUCKET_BYTES), 2), np.nan)
    for b in range(len(BUCKET_BYTES)):
        share = (b + 1) / (len(BUCKET_BYTES) + 1)
        values[:, :, b, 0] = starts[:, :, backward] + share * timings[:, :, backward]
        values[:, :, b, 1] = starts[:, :, comm_wait] + share * timings[:, :, comm_wait]
    d = group.create_dataset("bucket_times", data=values)
    d.attrs["bucket_bytes"] = json.dumps(BUCKET_BYTES)
    d.attrs["columns"] = json.dumps(["launched_s", "completed_s"])


#: Per-rank metrics of a `batch_size: auto` cell besides RANK_METRICS (layout 1.4).
AUTO_RANK_METRICS = ["batch_size", "memory_budget_bytes", "batch_search_s"]


def write_probes(group: h5py.Group, probes, status, times) -> None:
    """The `probes` and `probe_times` datasets as results/cells.cc write_probes()
    writes them (contiguous float64, JSON `columns` and `status`)."""
    d = group.create_dataset("probes", data=np.asarray(probes, dtype=np.float64))
    d.attrs["columns"] = json.dumps(PROBE_COLUMNS)
    d.attrs["status"] = json.dumps(list(status))
    group.create_dataset("probe_times", data=np.asarray(times, dtype=np.float64))


def _root_attrs(f, path):
    a = f.attrs
    a["scalebench_layout_version"] = LAYOUT_VERSION
    a["tool_version"], a["tool_commit"], a["tool_dirty"] = "0.1.0", "c" * 40, np.int8(0)
    a["build_type"] = "Release"
    for lib, ver in (
        ("torch", "2.5.1"),
        ("cuda", ""),
        ("nccl", ""),
        ("mpi", "Open MPI 4.1"),
        ("hdf5", "1.14.0"),
    ):
        a[f"{lib}_version"] = ver
    a["hosts"] = json.dumps(["node0"])
    a["devices"] = json.dumps(
        [
            {
                "rank": r,
                "host": "node0",
                "device": "cpu",
                "cpu": "Synthetic CPU @ 2.0GHz",
                "cores": 16,
            }
            for r in (1, 2)
        ]
    )
    a["mpi_thread_level"] = "MPI_THREAD_MULTIPLE"
    a["mpi_size"] = np.int64(3)
    a["argv"] = json.dumps(["scalebench", "run", "quickstart.yaml", "-o", str(path)])
    a["matrix_path"] = "quickstart.yaml"
    a["matrix_hash"] = "0123456789abcdef"
    a["matrix_text"] = "# synthetic matrix written by tests/analysis/make_results.py\n"
    # Layout 1.6: the matrix's warnings, repeated by the overview (a stand-in task file).
    a["matrix_warnings"] = json.dumps(
        ["tasks.csv:1:1: warning: every row runs scalebench's built-in stand-in model (unet3d)"]
    )
    a["environment"] = json.dumps({"OMP_NUM_THREADS": "1"})
    a["start_time"], a["end_time"] = "2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z"
    a["run_count"] = np.int64(1)
    # Layout 1.5: the writer's commits, the order seed of the interleaved repetitions.
    a["commit_log"] = json.dumps(
        [[ORIGIN_EPOCH_S + 1.0, 0.004, 3], [ORIGIN_EPOCH_S + 9.0, 0.005, 4]]
    )
    a["order_seed"] = str(fnv1a64("0123456789abcdef"))


def _fixed_string(value: str) -> np.ndarray:
    """A fixed-length, NUL-terminated UTF-8 string as the C++ writer stores every string
    since layout 1.2 (Note [Fixed-length strings] in common/hdf5/wrappers.cc)."""
    data = value.encode("utf-8")
    return np.array(data, dtype=h5py.string_dtype("utf-8", len(data) + 1))


def fix_strings(f: h5py.File) -> None:
    """Rewrites every variable-length string attribute and dataset of `f` fixed-length."""
    objects = [f]
    f.visititems(lambda _name, obj: objects.append(obj))
    for obj in objects:
        for name in list(obj.attrs):
            if h5py.check_string_dtype(obj.attrs.get_id(name).dtype) is None:
                continue
            if obj.attrs.get_id(name).get_type().is_variable_str():
                value = obj.attrs[name]
                obj.attrs[name] = _fixed_string(value if isinstance(value, str) else value.decode())
    for name in ("rank_hosts", "rank_devices"):
        for obj in objects:
            if isinstance(obj, h5py.Group) and name in obj:
                values = [v.decode() if isinstance(v, bytes) else v for v in obj[name][()]]
                width = max([len(v.encode()) for v in values] + [0]) + 1
                del obj[name]
                kind = h5py.string_dtype("utf-8", width)
                obj.create_dataset(name, data=np.array([v.encode() for v in values], dtype=kind))


#: The `accuracy` subgroup (layout 1.3) as the C++ writer stores it: these attributes are
#: int64, `verdict`, `failed_checks` (JSON list), `kind` and `reference` fixed-length
#: strings, every other attribute float64 (schemas/results-layout.md).
ACCURACY_INTEGERS = ("validation_samples", "elements", "steps")
ACCURACY_LAYOUT_VERSION = "1.3"
ACCURACY_REFERENCE = "fp32, every optimization switch off, same weights and inputs"


def write_accuracy(
    group: h5py.Group, verdict: str, failed_checks=(), kind: str = "inference", **numbers
) -> None:
    """(Re)writes `group/accuracy` of a cell: the verdict, the failed checks, the kind and
    the given numbers (mae=..., psnr_db=float("inf"), steps=..., ...)."""
    if "accuracy" in group:
        del group["accuracy"]
    sub = group.create_group("accuracy")
    sub.attrs["verdict"] = _fixed_string(verdict)
    sub.attrs["failed_checks"] = _fixed_string(json.dumps(list(failed_checks)))
    sub.attrs["kind"] = _fixed_string(kind)
    sub.attrs["reference"] = _fixed_string(ACCURACY_REFERENCE)
    for name, value in numbers.items():
        sub.attrs[name] = np.int64(value) if name in ACCURACY_INTEGERS else np.float64(value)


def add_accuracy(path, cell_id: str, verdict: str, failed_checks=(), **kwargs) -> None:
    """Adds an `accuracy` group to one cell of the file at `path` (see write_accuracy) and
    marks the file layout 1.3, the first to have one."""
    with h5py.File(path, "r+") as f:
        write_accuracy(f["cells"][cell_id], verdict, failed_checks, **kwargs)
        version = f.attrs["scalebench_layout_version"]
        version = version.decode() if isinstance(version, bytes) else version
        if tuple(map(int, version.split("."))) < (1, 3):
            f.attrs["scalebench_layout_version"] = _fixed_string(ACCURACY_LAYOUT_VERSION)


#: The golden listing of the C++ store's layout test (tests/unit/common/
#: results_store_layout_test.cc), which test_summary.py holds the synthetic file to.
LAYOUT_GOLDEN = REPO / "tests" / "data" / "results" / "layout_v1.txt"
#: A passed training `accuracy` group (values made up; only names and types matter to the
#: golden).
TRAINING_ACCURACY = {
    "tolerance": 0.01,
    "steps": WARMUP + MEASURED,
    "validation_samples": 32,
    "max_loss_rel_deviation": 0.0002,
    "final_loss": 2.3005,
    "reference_final_loss": 2.3,
    "param_rel_distance": 0.0001,
}


def golden_lists_accuracy() -> bool:
    """Whether the layout golden's ok cell (a training cell of 2 ranks) has an `accuracy`
    group: since layout 1.3 the C++ layout test validates it, and the synthetic file then
    plants one on its ok training cells of 2 ranks to match."""
    return any(
        line.startswith("/cells/<ok-cell>/accuracy ")
        for line in LAYOUT_GOLDEN.read_text().splitlines()
    )


def write_results(path, seed: int = 20240601, repetitions: bool = False) -> str:
    """Writes the synthetic results file to `path` and returns `path` as str; with
    `repetitions`, the repeated cells and `/series` of add_repetitions too (the file under
    test of conftest.py has them)."""
    rng = np.random.default_rng(seed)
    per_sample = {"main": 0.0010, "feature": 0.00085}
    specs = []
    plant_accuracy = golden_lists_accuracy()
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        _root_attrs(f, path)
        cells = f.create_group("cells")
        for branch in ("main", "feature"):
            for world in (1, 2):
                for batch in (16, 32):
                    spec = make_spec(branch, "train", batch, world)
                    noisy = branch == "feature" and batch == 32 and world == 1
                    straggler = 1 if (branch == "main" and batch == 16 and world == 2) else None
                    t = train_timings(
                        rng,
                        batch,
                        world,
                        per_sample[branch],
                        sigma=0.25 if noisy else 0.02,
                        straggler=straggler,
                    )
                    _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED] * world)
                    if plant_accuracy and world == 2:
                        write_accuracy(
                            cells[spec["cell_id"]], "passed", kind="training", **TRAINING_ACCURACY
                        )
                    specs.append(spec)
                    samples = batch * sum(MEASURED - r for r in range(world))
                    spec = make_spec(branch, "infer", batch, world, samples=samples)
                    if branch == "feature" and batch == 32 and world == 2:
                        _write_cell(cells, spec, "failed", rng, reason="forward: shape mismatch")
                        continue
                    drift = 0.3 if (branch == "main" and batch == 16 and world == 1) else 0.0
                    t, counts = infer_timings(
                        rng, batch, world, per_sample[branch] / 3, drift=drift
                    )
                    _write_cell(cells, spec, "ok", rng, t, counts)
        for batch in (16, 32):
            spec = make_spec("main", "train", batch, 1, precision="bf16")
            t = train_timings(rng, batch, 1, per_sample["main"] / 1.4)
            _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED])
        _write_cell(
            cells,
            make_spec("main", "train", 64, 1),
            "oom",
            rng,
            reason="CUDA out of memory. Tried to allocate 2.00 GiB",
        )
        _write_cell(cells, make_spec("feature", "train", 64, 1), "skipped", rng)
        for experiment, model, shape, search, settings in (
            ("mlp-auto", "mlp", (64,), plateau_search(), {"memory_limit_mb": 512.0}),
            (
                "cnn-auto",
                "resnet18",
                (3, 64, 64),
                memory_bound_search(),
                {"min_batch": 4, "latency_slo_ms": 100.0},
            ),
        ):
            spec = make_spec(
                "main",
                "train",
                0,
                search.world,
                experiment=experiment,
                model=model,
                input_shape=shape,
                **settings,
            )
            batch = search.recommended_batch  # the timed loop's step as the probe's
            t = train_timings(rng, batch, search.world, (search.step_s(batch) - 0.002) / batch)
            _write_cell(cells, spec, "ok", rng, t, [WARMUP + MEASURED] * search.world, auto=search)
        f.attrs["cell_count"] = np.int64(len(cells))  # layout 1.5
        fix_strings(f)
    if repetitions:
        from results_edits import add_repetitions  # it builds on this module

        add_repetitions(path)
    return str(path)


def add_multinode_cell(path, hosts, slow_ranks=(), batch: int = 16, seed: int = 41) -> str:
    """Adds to the file at `path` an ok training cell of len(hosts) ranks (experiment
    `mlp-nodes`, per-rank `batch`) whose rank r ran on hosts[r] and whose `slow_ranks`
    compute 30 % slower (train_timings' straggler); returns its cell id. The root attribute
    `hosts` gains the new hosts."""
    rng = np.random.default_rng(seed)
    world = len(hosts)
    spec = make_spec("main", "train", batch, world, experiment="mlp-nodes")
    timings = train_timings(rng, batch, world, 0.001, straggler=list(slow_ranks) or None)
    with h5py.File(path, "r+") as f:
        cells = f["cells"]
        _write_cell(cells, spec, "ok", rng, timings, [WARMUP + MEASURED] * world, hosts=hosts)
        f.attrs["cell_count"] = np.int64(len(cells))
        known = json.loads(_text_attr(f, "hosts"))
        f.attrs["hosts"] = json.dumps(known + [h for h in dict.fromkeys(hosts) if h not in known])
        fix_strings(f)
    return spec["cell_id"]


def _text_attr(obj, name: str) -> str:
    value = obj.attrs[name]
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


if __name__ == "__main__":
    print(write_results(sys.argv[1] if len(sys.argv) > 1 else "synthetic_results.h5"))
