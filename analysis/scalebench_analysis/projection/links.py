"""The communication a projection uses, per curve: the link fits (from probe files, or
from the curve's measured exposed communication), the overhead the fit leaves, the
gradient bytes and the gradient-ready curve. See Note [Projection model]."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from . import schedule
from .comm import INTER, INTRA, LinkFit, Observation, fit_exposed
from .compute import compute_at
from .inputs import MeasuredCell


@dataclass(frozen=True)
class Communication:
    """One curve's communication model. `links` maps INTRA / INTER to a LinkFit (either may
    be absent); `overhead_s` is what the measured exposed communication holds beyond the
    modelled allreduces (the division and copy back of the gradients, docs/ddp.md), added
    at every world > 1; `gradient_bytes` NaN when unknown."""

    links: dict
    overhead_s: float
    gradient_bytes: float
    gradient_source: str
    curve: tuple
    curve_source: str
    first_bucket_bytes: float
    bucket_bytes: float
    notes: list = field(default_factory=list)

    def nodes(self, workers: int, gpus_per_node: int | None) -> int:
        return 1 if not gpus_per_node else math.ceil(workers / gpus_per_node)

    def link(self, workers: int, gpus_per_node: int | None) -> LinkFit | None:
        """The link of `workers` ranks: inter-node when they span nodes, else intra-node;
        the other level's fit where the one needed was not measured (noted by missing())."""
        level = INTER if self.nodes(workers, gpus_per_node) > 1 else INTRA
        return self.links.get(level) or self.links.get(INTRA if level == INTER else INTER)

    def has_latency(self, workers: int, gpus_per_node: int | None) -> bool:
        """Whether the link of `workers` ranks has a latency term (a bucket size trades it
        against overlap; without it the smallest bucket always wins)."""
        link = self.link(workers, gpus_per_node)
        return link is not None and link.step_latency_s > 0

    def missing(self, workers: int, gpus_per_node: int | None) -> str | None:
        """What input a projection at `workers` lacks, with what to run; None when none."""
        level = INTER if self.nodes(workers, gpus_per_node) > 1 else INTRA
        if level in self.links or not self.links:
            return None
        if level == INTER:
            return (
                f"no measurement across nodes: the inter-node link is taken as the "
                f"intra-node one for {workers} workers; run `scalebench probe -o probe.h5` "
                f"over 2 nodes and pass --probe"
            )
        return "no intra-node measurement: the inter-node link stands for it"

    def exposed_s(self, backward_s: float, workers: int, gpus_per_node, bucket_bytes=None):
        """Exposed communication (s) at `workers` ranks with the bucket cap `bucket_bytes`
        (default: the cell's), backward lasting `backward_s`."""
        if workers <= 1 or not math.isfinite(self.gradient_bytes):
            return 0.0
        link = self.link(workers, gpus_per_node)
        if link is None:
            return float("nan")
        cap = self.bucket_bytes if bucket_bytes is None else bucket_bytes
        sizes = schedule.bucket_sizes(self.gradient_bytes, self.first_bucket_bytes, cap)
        ready = schedule.ready_fractions(sizes, self.curve)
        exposed = schedule.exposed_s(
            backward_s, sizes, ready, lambda s: link.allreduce_s(s, workers)
        )
        return exposed + self.overhead_s


def _curve(cells: Sequence[MeasuredCell]) -> tuple[tuple, str]:
    with_buckets = [c for c in cells if c.ready_curve is not None]
    if not with_buckets:
        return schedule.UNIFORM_CURVE, "uniform over backward (no bucket_times recorded)"
    cell = max(with_buckets, key=lambda c: c.world_size)
    return cell.ready_curve, f"the buckets of the w{cell.world_size} b{cell.batch_size} cell"


def _gradient(cells: Sequence[MeasuredCell]) -> tuple[float, str]:
    known = [c for c in cells if math.isfinite(c.gradient_bytes) and c.gradient_bytes > 0]
    if not known:
        return float("nan"), cells[0].gradient_source if cells else "unknown"
    best = max(known, key=lambda c: (c.ready_curve is not None, c.world_size))
    return best.gradient_bytes, best.gradient_source


def _exposed_at(model: Communication, cells, cell: MeasuredCell, link: LinkFit) -> float:
    """The modelled exposed communication of a measured cell with `link`, no overhead."""
    backward = compute_at(list(cells), cell.batch_size, cell.world_size).backward_s
    trial = replace(model, links={link.level: link}, overhead_s=0.0, bucket_bytes=cell.bucket_bytes)
    return trial.exposed_s(backward, cell.world_size, None)


def communication(cells: Sequence[MeasuredCell], probe_links: Sequence[LinkFit]) -> Communication:
    """The communication model of one training curve from its fit cells and the probe
    files' link fits (the one of most workers per level); without probe files, fitted from
    the exposed communication of the cells of 2 workers or more, per level."""
    gradient, source = _gradient(cells)
    curve, curve_source = _curve(cells)
    model = Communication(
        {},
        0.0,
        gradient,
        source,
        curve,
        curve_source,
        cells[0].first_bucket_bytes,
        cells[0].bucket_bytes,
    )
    if not math.isfinite(gradient):
        note = "gradient size unknown: communication left out (a lower bound on the step)"
        return replace(model, notes=[note])
    observed = [c for c in cells if c.world_size > 1 and math.isfinite(c.exposed_s)]
    levels = {
        INTRA: [c for c in observed if c.hosts <= 1],
        INTER: [c for c in observed if c.hosts > 1],
    }
    if probe_links:
        links = {}
        for level in (INTRA, INTER):
            fits = [fit for fit in probe_links if fit.level == level]
            if fits:
                links[level] = max(fits, key=lambda fit: fit.fitted_world)
        gaps = [
            cell.exposed_s
            - _exposed_at(model, cells, cell, links.get(level) or next(iter(links.values())))
            for level, members in levels.items()
            for cell in members
        ]
        overhead = max(0.0, float(np.median(gaps))) if gaps else 0.0
        return replace(model, links=links, overhead_s=overhead)
    if not observed:
        note = (
            "no cell of 2 workers or more and no probe: communication cannot be fitted; run "
            "`mpirun -np 3 scalebench probe -o probe.h5` and pass --probe probe.h5"
        )
        return replace(model, notes=[note])
    links = {
        level: fit_exposed(
            [
                Observation(
                    c.world_size, c.exposed_s, lambda link, c=c: _exposed_at(model, cells, c, link)
                )
                for c in members
            ],
            level,
        )
        for level, members in levels.items()
        if members
    }
    return replace(model, links=links)
