"""A synthetic results file of a large sweep (issue 53): experiments x batch sizes of
inference cells, world 1, written in seconds rather than minutes.

make_results.py writes each cell attribute by attribute (about 3 ms a cell: 10^4 cells would
take half a minute). Here each experiment's first cell is written that way (the C++ layout,
its summary computed from its timings by reference_figures.py); every other batch of the
experiment is an HDF5 copy of it (H5Ocopy: about 0.2 ms) whose varying attributes are then
overwritten in place, each at its stored size: the `spec` JSON is padded with spaces to one
width per experiment, the numbers are scalars. See Note [Sweep cells as copies].

The cells: experiment `e<k>` (k = 1..experiments), batch sizes 1..batches, infer, world 1,
fp32, all `ok`. The median batch time is (0.1 ms + batch x per-sample time) x the
experiment's factor x a seeded lognormal noise of 3 %, so each experiment has a best batch;
`median_s`, `p50_s`, `throughput_samples_per_s` and `samples_per_s_per_worker` follow it.
The other summary figures, the timings and the rank metrics are the template's (the first
batch's): a sweep file for measuring the tools, not for checking figures.

Run as a script: python make_sweep.py out.h5 EXPERIMENTS BATCHES [--summary-only]
"""

from __future__ import annotations

import hashlib
import json
import sys

import h5py
import numpy as np
from h5py import h5a, h5o

import make_results
from synthetic_cells import infer_timings, make_spec

# Note [Sweep cells as copies]
# A copy shares nothing with its template (H5Ocopy duplicates the objects), so writing its
# attributes in place changes that cell only. In place means at the attribute's stored type:
# a fixed-length string keeps its length (the spec is padded with trailing spaces, which
# JSON allows; every reader parses it), a number its width. Cell ids are 16 hex digits of a
# BLAKE2 digest of the spec rather than the C++ FNV-1a (make_spec's), which in Python would
# cost more than the copy itself; nothing reads an id as a hash.

#: Summary attributes each copy overwrites: times, then rates (samples per second).
_SUMMARY_SCALED = ("median_s", "p50_s")
_SUMMARY_RATES = ("throughput_samples_per_s", "samples_per_s_per_worker")


def _write(object_id, name: str, value: np.ndarray) -> None:
    """Writes `value` into the existing attribute `name` at its stored type."""
    attr = h5a.open(object_id, name.encode())
    attr.write(value, mtype=attr.get_type())


def _specs(experiment: str, batches: int) -> list[dict]:
    """The specs of one experiment's cells, batch 1..batches: make_spec's (the C++ field set)
    with the batch and a BLAKE2 cell id (Note [Sweep cells as copies])."""
    template = make_spec("main", "infer", 1, 1, experiment=experiment)
    del template["cell_id"]
    specs = []
    for batch in range(1, batches + 1):
        spec = dict(template, batch_size=batch)
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        spec["cell_id"] = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        specs.append(spec)
    return specs


def _median_s(rng, factor: float, batch: int) -> float:
    return (1e-4 + batch * 2e-5 / (1 + batch / 32)) * factor * rng.lognormal(0.0, 0.03)


#: What a summary-only cell stores (write_sweep's complete=False): the cell attributes the
#: cells table is made of, and the summary figures the trust checks and the console read.
#: At most 8 attributes an object, which HDF5 keeps in the object header (its default
#: max_compact) rather than in dense storage: about twice as fast to read.
_CELL_ONLY = ("branch", "experiment", "mode", "precision", "batch_size", "world_size")
_SUMMARY_ONLY = {
    "count": np.int64(20),
    "cv": 0.03,
    "median_s": 1e-3,
    "p99_s": 1.2e-3,
    "throughput_samples_per_s": 1e3,
    "valid_cv": np.int8(1),
    "valid_enough_iterations": np.int8(1),
    "valid_replicas_in_sync": np.int8(1),
}


def _write_summary_only_cell(cells: h5py.Group, spec: dict, text: str) -> None:
    g = cells.create_group(spec["cell_id"])
    g.attrs["spec"] = make_results._fixed_string(text)
    g.attrs["status"] = make_results._fixed_string("ok")
    for key in _CELL_ONLY:
        value = spec[key]
        g.attrs[key] = (
            make_results._fixed_string(value) if isinstance(value, str) else np.int64(value)
        )
    summary = g.create_group("summary")
    for key, value in _SUMMARY_ONLY.items():
        summary.attrs[key] = value if isinstance(value, np.generic) else np.float64(value)


def write_sweep(path, experiments: int, batches: int, complete: bool = True, seed: int = 53) -> str:
    """Writes the sweep of `experiments` x `batches` cells to `path`; returns `path` as str.
    `complete`: every part of a cell as the C++ writer stores it (timings, rank metrics, ...);
    else the cell attributes and a summary alone (Note [Sweep cells as copies]: about 0.2 ms
    a cell either way, but a summary-only cell reads about 4x faster)."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        make_results._root_attrs(f, path)
        make_results.fix_strings(f)  # the root's strings, before there are cells to visit
        cells = f.create_group("cells")
        for k in range(1, experiments + 1):
            factor = rng.uniform(0.5, 2.0)
            specs = _specs(f"e{k}", batches)
            width = max(len(json.dumps(s)) for s in specs)
            texts = [json.dumps(s).ljust(width).encode() + b"\0" for s in specs]
            template = specs[0]
            if complete:
                timings, counts = infer_timings(rng, 1, 1, 2e-5 * factor)
                make_results._write_cell(cells, template, "ok", rng, timings, counts)
                source = cells[template["cell_id"]]
                make_results.fix_strings(source)
                source.attrs["spec"] = make_results._fixed_string(texts[0][:-1].decode())
            else:
                _write_summary_only_cell(cells, template, texts[0][:-1].decode())
                source = cells[template["cell_id"]]
            for index, spec in enumerate(specs):
                batch = index + 1
                if index:
                    h5o.copy(source.id, b".", cells.id, spec["cell_id"].encode())
                group = h5o.open(cells.id, spec["cell_id"].encode())
                summary = h5o.open(group, b"summary")
                median = _median_s(rng, factor, batch)
                _write(group, "spec", np.array(texts[index], dtype=f"S{width + 1}"))
                _write(group, "batch_size", np.array(batch, dtype=np.int64))
                for name in _SUMMARY_SCALED if complete else ("median_s",):
                    _write(summary, name, np.array(median))
                for name in _SUMMARY_RATES if complete else ("throughput_samples_per_s",):
                    _write(summary, name, np.array(batch / median))
                if complete:
                    _write(summary, "batch_size", np.array(batch, dtype=np.int64))
        f.attrs["cell_count"] = np.int64(len(cells))
    return str(path)


if __name__ == "__main__":
    complete = "--summary-only" not in sys.argv
    arguments = [a for a in sys.argv[1:] if a != "--summary-only"]
    print(write_sweep(arguments[0], int(arguments[1]), int(arguments[2]), complete))
