"""Operator profiles of a program cell (docs/profiles.md#program-cells): the steps after the
measured ones under ``torch.profiler``, reduced to one ``profile`` record.

A cell with ``profile_steps: N`` asks its program for N more steps (``{steps}`` includes them)
and tells the client N (``SCALEBENCH_PROFILE_STEPS``). Steps ``W + M`` to ``W + M + N - 1``
(after ``SCALEBENCH_WARMUP`` warm-up and ``SCALEBENCH_ITERATIONS`` measured ones) are the
profiled steps: their step records say ``"profile": true`` and the worker keeps them out of
every measured figure. The profiler starts before the first of them begins (CPU operators
with their CPU memory; the CUDA kernels too when ``torch.cuda.is_available()``), each phase is
a ``record_function("scalebench.phase/<name>")`` scope and the step itself one named after
the cell's step column (``step``, ``batch``), and after the last one it stops; the events are
reduced here (scalebench_client.profile_rows) and sent as one record of at most
``RECORD_BUDGET`` bytes: the rows of least self time that do not fit are dropped and counted.

Before the profiler starts, the memory the program would report now is kept: ``memory()``
afterwards reports it, so the peak is that of the measured steps, not the profiler's.

Never fails the program: a profiler that cannot start or stop, or events it cannot read,
become a ``profile`` record with an ``error`` (the worker records it as the reason the cell
has no operator table). Adapters that do not run torch (JAX, Keras) say so with
``unsupported``.
"""

from __future__ import annotations

import json
import re
import sys

from . import profile_rows

#: The profile record's largest size in bytes: the worker's line limit (64 KiB) less room for
#: the record's other fields.
RECORD_BUDGET = 60_000
#: Longest operator name kept (bytes of UTF-8; the worker refuses longer ones).
MAX_NAME_BYTES = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _clean(name: str) -> str:
    """A name as the worker accepts it: valid UTF-8 (a lone surrogate replaced), no control
    character, at most MAX_NAME_BYTES bytes (cut on a character boundary)."""
    data = _CONTROL.sub("?", name).encode("utf-8", "replace")
    if len(data) > MAX_NAME_BYTES:
        data = data[:MAX_NAME_BYTES]
    return data.decode("utf-8", "ignore")


def convert(events) -> list:
    """torch.profiler's Kineto events (``profile.profiler.kineto_results.events()``) as
    profile_rows.Event, as the worker converts LibTorch's (worker/op_profiler.cc); events of
    other kinds (CUPTI overhead, syncs, annotations on the GPU) are left out."""
    import torch

    cpu = torch.autograd.DeviceType.CPU
    out = []
    for event in events:
        name = event.name()
        kind = _activity(event, cpu)
        start = event.start_ns()
        times = (event.start_thread_id(), start, start + event.duration_ns())
        if kind == "user_annotation" and name.startswith(profile_rows.PHASE_SCOPE):
            phase = name[len(profile_rows.PHASE_SCOPE) :]
            out.append(profile_rows.Event(profile_rows.PHASE, phase, *times))
        elif name == "[memory]":  # the allocation events, whatever their type
            if event.device_type() == cpu:
                out.append(
                    profile_rows.Event(
                        profile_rows.MEMORY, name, *times, nbytes=event.nbytes()
                    )
                )
        elif kind in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"):
            out.append(
                profile_rows.Event(
                    profile_rows.OP,
                    _clean(name),
                    *times,
                    correlation=event.correlation_id(),
                )
            )
        elif kind in ("kernel", "gpu_memcpy", "gpu_memset"):
            out.append(
                profile_rows.Event(
                    profile_rows.KERNEL,
                    _clean(name),
                    *times,
                    link=event.linked_correlation_id(),
                )
            )
    return out


def _activity(event, cpu) -> str:
    """Kineto's activity type of `event` ("cpu_op", "kernel", ...): its own where torch
    says it (``activity_type``, torch 2.12+), else told from its device and whether it is a
    user annotation (torch 2.11, seen on an H200's image)."""
    if hasattr(event, "activity_type"):
        return event.activity_type()
    gpu = event.device_type() != cpu
    if event.is_user_annotation():
        return "gpu_user_annotation" if gpu else "user_annotation"
    return "kernel" if gpu else "cpu_op"


def profile_record(steps: int, activities: list, rows: list) -> dict:
    """The ``profile`` record of `rows` (self time descending), within RECORD_BUDGET bytes:
    the rows that do not fit, the last ones, are counted in ``dropped_rows`` with their self
    time in ``dropped_self_s``."""
    ops, used, dropped, dropped_s = [], 0, 0, 0.0
    for row in rows:
        size = len(json.dumps(list(row), separators=(",", ":"))) + 1
        if dropped or used + size > RECORD_BUDGET:
            dropped += 1
            dropped_s += row.self_s
            continue
        used += size
        ops.append(list(row))
    record = {"type": "profile", "steps": steps, "activities": activities, "ops": ops}
    if dropped:
        record.update(dropped_rows=dropped, dropped_self_s=dropped_s)
    return record


class Profiling:
    """The profiled steps of this process: created by the client when the cell asks for
    them. Not thread-safe (steps are begun and ended by one thread, as the client's are)."""

    def __init__(
        self, first: int, steps: int, step_phase: str, write, snapshot
    ) -> None:
        self.first = first  # index of the first profiled step (warm-up + measured)
        self.steps = steps
        self.step_phase = step_phase
        self.write = write  # writes a record on the report channel
        self.snapshot = snapshot  # () -> the memory record memory() would write now
        self.unsupported = ""  # set by an adapter that does not run torch
        self.memory: dict | None = None  # the memory record kept before profiling
        self.profiler = None
        self.recording = False
        self.done = False
        self.profiled = 0
        self.activities: list = []
        self.step_scope = None
        self.scopes: list = []

    def begin_step(self, index: int) -> None:
        """Step `index` begins (before its clock is read): the profiler starts before the
        first profiled step, and each profiled step opens its scope."""
        if self.done or index < self.first:
            return
        if not self.recording:
            self._start()
            if not self.recording:
                return
        self.step_scope = self.phase_begin(self.step_phase)

    def phase_begin(self, name: str):
        """Opens the scope of phase `name`; returns its handle for phase_end (None when not
        recording)."""
        if not self.recording:
            return None
        try:
            import torch

            scope = torch.autograd.profiler.record_function(
                profile_rows.PHASE_SCOPE + name
            )
            scope.__enter__()
        except Exception:  # noqa: BLE001 - the program goes on without this scope
            return None
        self.scopes.append(scope)
        return scope

    def phase_end(self, scope) -> None:
        if scope is None or scope not in self.scopes:
            return
        self.scopes.remove(scope)
        try:
            scope.__exit__(None, None, None)
        except Exception:  # noqa: BLE001, S110 - a scope that cannot close is left to the profiler
            pass

    def end_step(self) -> None:
        """A profiled step ended (after its record): its open scopes close; after the last
        one the profiler stops and the record is sent. A profiled step that was never begun
        (an adapter that reports steps without ``begin_step``) gets the profile refused."""
        if not self.recording:
            if not self.done:
                self._fail(
                    self.unsupported
                    or "the program's adapter reported its steps without opening them to the "
                    "profiler (scalebench_client.profile_step_begin)"
                )
            return
        for scope in list(reversed(self.scopes)):
            self.phase_end(scope)
        self.step_scope = None
        self.profiled += 1
        if self.profiled >= self.steps:
            self._finish()

    def close(self) -> None:
        """At the program's end: a profile still recording (the program ran fewer profiled
        steps than asked) is sent with the steps it has."""
        if self.recording:
            for scope in list(reversed(self.scopes)):
                self.phase_end(scope)
            self._finish()

    def _fail(self, why: str) -> None:
        self.done = True
        self.write({"type": "profile", "steps": self.profiled, "error": why[:4000]})

    def _start(self) -> None:
        if self.unsupported:
            self._fail(self.unsupported)
            return
        torch = sys.modules.get("torch")
        if torch is None:
            self._fail(
                "operator profiles use torch.profiler, and the program did not import torch"
            )
            return
        try:
            self.memory = self.snapshot()
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU]
            self.activities = ["cpu"]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
                self.activities.append("cuda")
            self.profiler = profile(activities=activities, profile_memory=True)
            self.profiler.start()
        except Exception as exception:  # noqa: BLE001 - never fail the program over it
            self.profiler = None
            self._fail(
                f"torch.profiler did not start: {type(exception).__name__}: {exception}"
            )
            return
        self.recording = True

    def _finish(self) -> None:
        self.recording = False
        self.done = True
        try:
            torch = sys.modules["torch"]
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                torch.cuda.synchronize()
            self.profiler.stop()
            events = convert(self.profiler.profiler.kineto_results.events())
            rows = profile_rows.summarize(events)
        except Exception as exception:  # noqa: BLE001 - never fail the program over it
            self.write(
                {
                    "type": "profile",
                    "steps": self.profiled,
                    "error": f"the profiled steps' events could not be read: "
                    f"{type(exception).__name__}: {exception}"[:4000],
                }
            )
            return
        finally:
            self.profiler = None
        self.write(profile_record(self.profiled, self.activities, rows))
