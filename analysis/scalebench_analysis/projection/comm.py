"""The allreduce cost model: latency + bytes / bandwidth per link level, ring algorithm,
fitted from a `scalebench probe` file or from the measured cells' exposed communication.
See Note [Projection model] in projection/__init__.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, least_squares, nnls

from ..errors import UsageError
from ..tables.probe import Probe

INTRA, INTER = "intra-node", "inter-node"


@dataclass(frozen=True)
class LinkFit:
    """Ring allreduce over one link level: each of the 2(n-1) ring steps costs
    `step_latency_s`, and each rank moves 2(n-1)/n of the message at
    `bus_bandwidth_bytes_per_s` (busbw, docs/probe.md#reading-the-table)."""

    level: str
    step_latency_s: float
    bus_bandwidth_bytes_per_s: float
    fitted_world: int
    source: str
    max_rel_residual: float = float("nan")

    def allreduce_s(self, nbytes, ranks: int):
        """Seconds of one allreduce of `nbytes` (scalar or array) over `ranks` ranks."""
        if ranks <= 1:
            return np.zeros_like(np.asarray(nbytes, dtype=float))
        steps = 2.0 * (ranks - 1)
        return (
            steps * self.step_latency_s
            + (steps / ranks) * np.asarray(nbytes, dtype=float) / self.bus_bandwidth_bytes_per_s
        )

    def describe(self) -> str:
        bandwidth = self.bus_bandwidth_bytes_per_s / 1e9
        fit = (
            f", fit within {self.max_rel_residual:.1%}"
            if math.isfinite(self.max_rel_residual)
            else ""
        )
        return (
            f"{self.level}: {self.step_latency_s * 1e6:.2f} us per ring step + bytes / "
            f"{bandwidth:.3f} GB/s busbw ({self.source}{fit})"
        )


def _probe_hosts(probe: Probe) -> int:
    hosts = probe.meta.get("hosts")
    return len(set(map(str, hosts))) if isinstance(hosts, list) and hosts else 1


def fit_probe(probe: Probe) -> LinkFit:
    """The ring fit of a probe file's allreduce rows (in place where it has any: DDP's
    allreduce is in place; correct rows only): time = a + c * bytes by least squares on
    the relative error, a, c >= 0; then step latency a / 2(P-1) and busbw 2(P-1)/P / c for
    its P workers. The level is inter-node when the probe's workers ran on more than one
    host. UsageError when the file cannot give a fit."""
    world = int(probe.meta.get("world_size", 0) or 0)
    if world < 2:
        raise UsageError(
            f"{probe.path}: a probe of {world} worker(s) moves nothing between ranks; run "
            f"`mpirun -np 3 scalebench probe -o probe.h5` (2 workers or more)"
        )
    rows = probe.rows[(probe.rows.operation == "allreduce") & probe.rows.ok]
    if rows.in_place.any():
        rows = rows[rows.in_place]
    rows = rows[np.isfinite(rows.time_s) & (rows.time_s > 0) & (rows.bytes > 0)]
    if rows.bytes.nunique() < 2:
        raise UsageError(
            f"{probe.path}: needs correct allreduce times at two message sizes or more, found "
            f"{rows.bytes.nunique()} (run `scalebench probe` with --ops allreduce)"
        )
    sizes, times = rows.bytes.to_numpy(float), rows.time_s.to_numpy(float)
    (a, c), _ = nnls(np.column_stack([1.0 / times, sizes / times]), np.ones_like(times))
    if c <= 0:
        raise UsageError(f"{probe.path}: allreduce time does not grow with size: no bandwidth")
    residual = float(np.max(np.abs((a + c * sizes) / times - 1.0)))
    hosts = _probe_hosts(probe)
    return LinkFit(
        level=INTER if hosts > 1 else INTRA,
        step_latency_s=a / (2.0 * (world - 1)),
        bus_bandwidth_bytes_per_s=2.0 * (world - 1) / world / c,
        fitted_world=world,
        source=f"probe {probe.path}: {world} workers on {hosts} host(s)",
        max_rel_residual=residual,
    )


@dataclass(frozen=True)
class Observation:
    """A measured cell's exposed communication (seconds) at `world`, and the model's
    exposed communication for a given link fit."""

    world: int
    exposed_s: float
    model: Callable[[LinkFit], float]


def fit_exposed(observations: Sequence[Observation], level: str) -> LinkFit:
    """A link fit whose modelled exposed communication matches the measured one: busbw
    alone (no latency term) when the observations hold one world size, latency and busbw
    by least squares when they hold two or more. Where communication was fully hidden the
    fit is the lowest bandwidth that hides it (a bound)."""
    worlds = sorted({o.world for o in observations})
    if not observations:
        raise ValueError("no observation to fit")
    source = f"exposed comm_wait of {len(observations)} cell(s) at world {worlds}"

    def fit(latency: float, bandwidth: float) -> LinkFit:
        return LinkFit(level, latency, bandwidth, max(worlds), source)

    def mean_gap(log_bandwidth: float) -> float:
        link = fit(0.0, math.exp(log_bandwidth))
        return float(np.mean([o.model(link) - max(o.exposed_s, 1e-9) for o in observations]))

    low, high = math.log(1e3), math.log(1e16)
    if mean_gap(high) > 0:  # even an infinite link leaves more exposed than measured
        log_bandwidth = high
    elif mean_gap(low) < 0:
        log_bandwidth = low
    else:
        log_bandwidth = brentq(mean_gap, low, high, xtol=1e-6)
    if len(worlds) < 2:
        return fit(0.0, math.exp(log_bandwidth))

    # Exposed communication is piecewise linear in (latency, 1 / busbw): solved in those,
    # scaled to about 1 (10 us of latency; the bandwidth-only fit), both >= 0.
    latency_scale, inverse_scale = 1e-5, math.exp(-log_bandwidth)

    def link_of(x) -> LinkFit:
        inverse = max(x[1] * inverse_scale, 1e-30)
        return fit(x[0] * latency_scale, 1.0 / inverse)

    def residuals(x):
        link = link_of(x)
        return [o.model(link) - o.exposed_s for o in observations]

    solved = least_squares(residuals, [0.0, 1.0], bounds=([0.0, 0.0], [np.inf, np.inf]))
    found = link_of(solved.x)
    return LinkFit(
        level,
        found.step_latency_s,
        found.bus_bandwidth_bytes_per_s,
        max(worlds),
        source + " (latency and bandwidth)",
    )
