"""The operator table of a program cell's profiled steps (docs/profiles.md#program-cells): the
profiler's events reduced to the rows scalebench stores per rank, as the worker reduces a
built-in cell's (``summarize_profile``, Note [Operator profiles] in common/cell/op_profile.h).
Pure: no torch here (scalebench_client.profiling converts torch.profiler's events).

The same three facts are rebuilt from a flat list of events (start, end, thread):

* self time: an operator's time minus that of the operators and phase scopes nested in it
  on the same thread. A phase nested in an operator is the operator's child: Lightning's
  ``Optimizer.step#Adam.step`` runs the closure with the step's forward, zero_grad and
  backward phases inside it, and the Python code of those phases (a ``time.sleep`` in the
  model's forward) is theirs, not the optimizer step's self time; outside every operator it is
  in no row (``compare --ops`` counts it unexplained). Built-in cells never nest a phase in an
  operator, so the worker's reduction is the same;
* phase: the innermost ``scalebench.phase/<name>`` scope whose interval holds the event's
  start, on any thread (backward ops run on autograd's threads); of equal starts the shorter
  scope; "" when none holds it. A GPU kernel takes the phase of the operator that launched it
  (its correlation id), "" when none is known;
* self memory: the CPU bytes of each memory event (allocations positive, frees negative),
  given to the innermost operator open on its thread at that moment.

Rows are aggregated by (device, phase, name) with count, self and total seconds over all the
profiled steps, sorted by self time descending, then device, phase and name.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

#: Name prefix of the phase scopes the client opens in profiled steps.
PHASE_SCOPE = "scalebench.phase/"

OP, PHASE, MEMORY, KERNEL = "op", "phase", "memory", "kernel"

_NS_PER_S = 1e9


class Event(NamedTuple):
    """One profiler event. `kind`: OP (a CPU operator, runtime call or user scope), PHASE
    (a phase scope, `name` the phase), MEMORY (`nbytes` allocated > 0 or freed < 0 at
    `start_ns`) or KERNEL (a GPU kernel or copy, `link` its launching op's correlation)."""

    kind: str
    name: str
    thread: int = 0
    start_ns: int = 0
    end_ns: int = 0
    nbytes: int = 0
    correlation: int = 0
    link: int = 0


class Row(NamedTuple):
    """One row of a rank's table, in the order of the `profile` record's lists."""

    name: str
    phase: str
    device: str
    count: int
    self_s: float
    total_s: float
    self_cpu_memory_bytes: float


def _duration_ns(event: Event) -> int:
    return max(0, event.end_ns - event.start_ns)


class _Phases:
    """The innermost phase scope at a moment: the scopes' boundaries split time into
    segments, each held by one innermost scope (or none), found by bisection."""

    def __init__(self, events: list) -> None:
        scopes = [e for e in events if e.kind == PHASE and e.end_ns > e.start_ns]
        self.bounds = sorted({t for s in scopes for t in (s.start_ns, s.end_ns)})
        self.names: list = []
        by_start = sorted(scopes, key=lambda s: s.start_ns)
        active: list = []
        next_scope = 0
        for bound in self.bounds:
            active = [s for s in active if s.end_ns > bound]
            while next_scope < len(by_start) and by_start[next_scope].start_ns <= bound:
                active.append(by_start[next_scope])
                next_scope += 1
            best = max(active, key=lambda s: (s.start_ns, -s.end_ns), default=None)
            self.names.append("" if best is None else best.name)

    def at(self, t: int) -> str:
        index = bisect.bisect_right(self.bounds, t) - 1
        return self.names[index] if index >= 0 else ""


def _nest(events: list) -> tuple:
    """(child_ns, memory) per event index: the time of the ops and phase scopes nested in
    each op on its thread, and the bytes of the memory events inside it (not inside a nested
    op or phase scope: memory outside every op is no row's)."""
    child_ns = [0] * len(events)
    memory = [0] * len(events)
    by_thread: dict = {}
    for i, event in enumerate(events):
        if event.kind in (OP, MEMORY, PHASE):
            by_thread.setdefault(event.thread, []).append(i)
    for indices in by_thread.values():
        # Start ascending; at one start an op before a memory event, the enclosing op first.
        indices.sort(
            key=lambda i: (
                events[i].start_ns,
                events[i].kind == MEMORY,
                -events[i].end_ns,
                i,
            )
        )
        open_ops: list = []
        for i in indices:
            event = events[i]
            while open_ops and events[open_ops[-1]].end_ns <= event.start_ns:
                open_ops.pop()
            if event.kind == MEMORY:
                if open_ops and events[open_ops[-1]].kind == OP:
                    memory[open_ops[-1]] += event.nbytes
                continue
            if open_ops:
                child_ns[open_ops[-1]] += _duration_ns(event)
            open_ops.append(i)
    return child_ns, memory


def summarize(events: list) -> list:
    """The rows of `events` (a list of Event), self time descending. Pure."""
    phases = _Phases(events)
    child_ns, memory = _nest(events)
    rows: dict = {}

    def add(
        device: str, phase: str, name: str, self_ns: int, total_ns: int, nbytes: int
    ):
        row = rows.setdefault((device, phase, name), [0, 0, 0, 0])
        row[0] += 1
        row[1] += self_ns / _NS_PER_S
        row[2] += total_ns / _NS_PER_S
        row[3] += nbytes

    phase_of_correlation: dict = {}
    for i, event in enumerate(events):
        if event.kind != OP:
            continue
        phase = phases.at(event.start_ns)
        if event.correlation:
            phase_of_correlation[event.correlation] = phase
        total = _duration_ns(event)
        add("cpu", phase, event.name, max(0, total - child_ns[i]), total, memory[i])
    for event in events:
        if event.kind == KERNEL:
            phase = phase_of_correlation.get(event.link, "")
            add("cuda", phase, event.name, _duration_ns(event), _duration_ns(event), 0)
    table = [
        Row(name, phase, device, count, self_s, total_s, float(nbytes))
        for (device, phase, name), (count, self_s, total_s, nbytes) in rows.items()
    ]
    table.sort(key=lambda r: (-r.self_s, r.device, r.phase, r.name))
    return table
