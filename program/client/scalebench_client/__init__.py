"""Report per-iteration phase times of a program to scalebench (docs/programs.md).

A program started by scalebench as a program cell finds the report channel in the
environment (``SCALEBENCH_REPORT_FD``) and writes newline-delimited JSON records to it
(schemas/program-records.md). Step records are buffered (64 KiB) and every other record is
written at once, so a step costs no system call while an error still reaches the worker.
Started any other way, every function here is a cheap no-op, so the same script runs
standalone.

    import scalebench_client as sb
    for batch in loader:
        with sb.step():
            with sb.phase("data"):
                x, y = next(it)
            with sb.phase("forward"):
                loss = model(x, y)
            ...
        sb.metric("loss", float(loss))

Times are ``time.monotonic_ns()`` (CLOCK_MONOTONIC, the clock of the worker that launched
the program, as integers: formatting them costs a fraction of a float's repr), taken when a
``with`` block is entered and left; nothing here synchronises a GPU.
For GPU phases that must be exact, synchronise in the program (``sync=True`` on ``phase``
calls ``torch.cuda.synchronize()`` first) and say so: docs/programs.md explains the cost.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

__version__ = "0.1.0"

#: Version of the record format (schemas/program-records.md); the worker refuses another major.
RECORD_VERSION = 1

_FD_VARIABLE = "SCALEBENCH_REPORT_FD"
#: The branch's tree the program runs in (docs/programs.md#code-identity); the working
#: directory when the client was imported stands in where it is unset.
_TREE_VARIABLE = "SCALEBENCH_TREE"
_START_CWD = os.getcwd()
_BUFFER_BYTES = 1 << 16
_OUTPUTS_VARIABLE = "SCALEBENCH_OUTPUTS_FILE"
#: Steps after the measured ones to run under torch.profiler (setting profile_steps;
#: scalebench_client.profiling); 0 or unset: none.
_PROFILE_VARIABLE = "SCALEBENCH_PROFILE_STEPS"


class _Channel:
    """The open report stream, or None when not started by scalebench."""

    def __init__(self) -> None:
        self.stream = None
        self.warmup = int(os.environ.get("SCALEBENCH_WARMUP", "0") or 0)
        self.steps = 0
        #: Index of the first profiled step (after warm-up and measured ones); none: never.
        self.profile_from = sys.maxsize
        self.output_samples = 0
        fd = os.environ.get(_FD_VARIABLE)
        if fd:
            # Lives as long as the process; finish() closes it.
            self.stream = os.fdopen(
                int(fd), "w", buffering=_BUFFER_BYTES, encoding="utf-8"
            )

    def write(self, record: dict[str, object]) -> None:
        """Writes a record other than a step, with the steps buffered before it."""
        if self.stream is None:
            return
        record["v"] = RECORD_VERSION
        self.stream.write(
            json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        )
        self.stream.flush()


_channel: _Channel | None = None
_phases: dict[str, list] | None = None
#: The profiled steps' session (scalebench_client.profiling) when the cell asks for some.
_profile = None
#: Why this program's steps cannot be profiled (profile_unsupported), "" when they can.
_unsupported = ""


def _get() -> _Channel:
    global _channel
    if _channel is None:
        _channel = _Channel()
        _hello(_channel)
        _start_profiling(_channel)
    return _channel


def profile_steps() -> int:
    """The steps the cell asks to run under the profiler after the measured ones (setting
    ``profile_steps``, docs/profiles.md#program-cells); 0 when none or not started by
    scalebench. ``{steps}`` includes them; a program that counts its steps from ``{warmup}``
    and ``{iterations}`` adds this."""
    if not os.environ.get(_FD_VARIABLE):
        return 0
    return max(0, int(os.environ.get(_PROFILE_VARIABLE, "0") or 0))


def _start_profiling(channel: _Channel) -> None:
    global _profile
    steps = profile_steps()
    measured = os.environ.get("SCALEBENCH_ITERATIONS")
    if channel.stream is None or steps <= 0 or not measured:
        return
    from . import profiling

    channel.profile_from = channel.warmup + int(measured)
    step_phase = "batch" if os.environ.get("SCALEBENCH_MODE") == "infer" else "step"
    _profile = profiling.Profiling(
        channel.profile_from, steps, step_phase, channel.write, _memory_record
    )
    _profile.unsupported = _unsupported


def profile_unsupported(why: str) -> None:
    """Says that this program's steps cannot be profiled and why (an adapter of a framework
    that does not run torch): the cell's profile is then recorded as not taken, with `why`."""
    global _unsupported
    _unsupported = why
    if _profile is not None:
        _profile.unsupported = why


def profile_step_begin() -> None:
    """For adapters that report steps with ``emit_step``: the next step begins now (call it
    before reading the step's begin time). A profiled step opens the profiler's scope of the
    step, and the first one starts the profiler."""
    channel = _channel if _channel is not None else _get()
    if _profile is not None:
        _profile.begin_step(channel.steps)


def profile_phase_begin(name: str):
    """For adapters: opens phase `name`'s profiler scope in a profiled step; returns the handle
    to pass to ``profile_phase_end`` (None when not profiling: nothing to close)."""
    if _profile is None or not _profile.recording:
        return None
    return _profile.phase_begin(name)


def profile_phase_end(scope) -> None:
    if scope is not None and _profile is not None:
        _profile.phase_end(scope)


def enabled() -> bool:
    """True when the program was started by scalebench (records go somewhere)."""
    return _get().stream is not None


#: Frameworks named in `hello`, most specific first: (module, framework name).
_FRAMEWORKS = (
    ("lightning", "lightning"),
    ("pytorch_lightning", "lightning"),
    ("keras", "keras"),
    ("jax", "jax"),
    ("tensorflow", "tensorflow"),
    ("torch", "pytorch"),
)


def _hello(channel: _Channel) -> None:
    versions = {"python": sys.version.split()[0], "client": __version__}
    framework = "python"
    for module_name, name in reversed(_FRAMEWORKS):
        module = sys.modules.get(module_name)
        if module is not None:
            framework = name
            versions[module_name] = str(getattr(module, "__version__", ""))
    channel.write(
        {
            "type": "hello",
            "framework": framework,
            "versions": versions,
            "pid": os.getpid(),
            "rank": int(os.environ.get("RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        }
    )


_monotonic_ns = time.monotonic_ns
#: JSON text of each phase name seen (names repeat every step; encoding them once is cheaper).
_names: dict[str, str] = {}


class _Step:
    """``with step():`` (a class, not a generator context manager: it runs every iteration,
    and the record is formatted by hand, both to keep the client's cost per step small;
    tests/perf/program_client.py measures it)."""

    __slots__ = ("begin",)

    def __enter__(self) -> None:
        global _phases
        channel = _get()
        if channel.stream is None:
            return
        if channel.steps == 0:
            _apply_memory_budget()
        if channel.steps >= channel.profile_from:
            _profile.begin_step(channel.steps)
        _phases = {}
        self.begin = _monotonic_ns()

    def __exit__(self, *exc_info: object) -> None:
        global _phases
        end = _monotonic_ns()
        phases = _phases
        _phases = None
        if phases is not None:
            emit_step(self.begin, end, phases)


def emit_step(begin: int, end: int, phases: dict) -> None:
    """Writes one step record: its [begin, end] and each phase's (begin, end), all
    ``time.monotonic_ns()`` integers. For adapters that see a framework's step from its hooks
    (scalebench_client.lightning) rather than through ``with step():``. A no-op when not
    started by scalebench."""
    channel = _channel if _channel is not None else _get()
    if channel.stream is None:
        return
    if channel.steps == 0:
        _apply_memory_budget()
    text = ",".join(
        f"{_names.get(name) or _encode(name)}:[{b},{e}]"
        for name, (b, e) in phases.items()
    )
    warmup = "true" if channel.steps < channel.warmup else "false"
    profiled = channel.steps >= channel.profile_from
    channel.stream.write(
        f'{{"v":{RECORD_VERSION},"type":"step","index":{channel.steps},"warmup":{warmup},'
        f'{_PROFILED if profiled else ""}"begin_ns":{begin},"end_ns":{end},'
        f'"phases":{{{text}}}}}\n'
    )
    channel.steps += 1
    if profiled:
        _profile.end_step()


#: The field of a step after the measured ones (scalebench_client.profiling): never measured.
_PROFILED = '"profile":true,'


_budget_applied = False


def _apply_memory_budget() -> None:
    """The cell's memory budget on a GPU (SCALEBENCH_MEMORY_BUDGET_BYTES, docs/programs.md):
    torch's CUDA allocator is capped at that share of the device, so an allocation beyond it
    raises torch.OutOfMemoryError as a full device would. On the CPU the worker holds the
    program's resident set to the budget itself."""
    global _budget_applied
    if _budget_applied:
        return
    _budget_applied = True
    budget = int(os.environ.get("SCALEBENCH_MEMORY_BUDGET_BYTES", "0") or 0)
    torch = sys.modules.get("torch")
    if budget <= 0 or torch is None or os.environ.get("SCALEBENCH_DEVICE") != "cuda":
        return
    if not torch.cuda.is_available():
        return
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total))


def _encode(name: str) -> str:
    _names[name] = json.dumps(str(name))
    return _names[name]


def step() -> _Step:
    """One iteration (a training step or an inference batch), as ``with sb.step():``. The
    first ``SCALEBENCH_WARMUP`` steps are marked warm-up. Phases inside it are timed with
    ``phase``."""
    return _Step()


class _Phase:
    __slots__ = ("begin", "name", "scope", "sync")

    def __init__(self, name: str, sync: bool) -> None:
        self.name = name
        self.sync = sync
        self.scope = None

    def __enter__(self) -> None:
        if _phases is None:
            return
        if self.sync:
            _synchronize()
        if _profile is not None and _profile.recording:
            self.scope = _profile.phase_begin(self.name)
        self.begin = _monotonic_ns()

    def __exit__(self, *exc_info: object) -> None:
        if _phases is None:
            return
        if self.sync:
            _synchronize()
        _phases[self.name] = (self.begin, _monotonic_ns())
        if self.scope is not None:
            _profile.phase_end(self.scope)


def phase(name: str, sync: bool = False) -> _Phase:
    """A named phase of the current step (``data``, ``h2d``, ``forward``, ``backward``,
    ``optimizer``, ... or any name), as ``with sb.phase("forward"):``. With ``sync=True``
    the GPU is synchronised before the phase begins and before it ends, so its time is the
    GPU's (and costs a stall)."""
    return _Phase(name, sync)


def _synchronize() -> None:
    """Waits for the GPU when this process has used one: torch imported and its CUDA context
    made. A process that never touched CUDA has nothing to wait for, and synchronising would
    create the context (hundreds of MiB and a second or more) inside a timed phase. Shared
    by ``phase(sync=True)`` and the adapters (scalebench_client.lightning)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def metric(name: str, value: float) -> None:
    """A named figure of the run (``loss``, ``accuracy``, ...); the last value is kept. A NaN
    or infinite value (a diverged loss) is kept too: JSON has no such numbers, so it travels
    as the text ``"nan"``, ``"inf"`` or ``"-inf"`` (docs/programs.md#the-records)."""
    channel = _get()
    number = float(value)
    channel.write(
        {
            "type": "metric",
            "name": name,
            "value": number if math.isfinite(number) else _non_finite_text(number),
            "step": channel.steps,
        }
    )


def _non_finite_text(number: float) -> str:
    if math.isnan(number):
        return "nan"
    return "inf" if number > 0 else "-inf"


def wants_outputs() -> bool:
    """Whether the cell compares outputs (``validate: true``) and wants more of them: a
    program may skip computing what it would hand to ``outputs`` when this is False."""
    channel = _get()
    return (
        channel.stream is not None
        and bool(os.environ.get(_OUTPUTS_VARIABLE))
        and channel.output_samples < _validation_samples()
    )


def _validation_samples() -> int:
    return int(os.environ.get("SCALEBENCH_VALIDATION_SAMPLES", "0") or 0)


def _as_float32(values):
    """``values`` (a torch tensor, a JAX/TensorFlow/NumPy array, a list) as a C-contiguous
    little-endian float32 NumPy array; a tensor is detached and copied to the host."""
    import numpy

    if hasattr(
        values, "detach"
    ):  # torch: also a tensor that requires grad, bf16, on a GPU
        values = values.detach().float().cpu().numpy()
    return numpy.ascontiguousarray(numpy.asarray(values, dtype="<f4"))


def outputs(values) -> None:
    """Hands model outputs for the accuracy check across cells (docs/accuracy.md#across-cells):
    call it with the outputs of the first batches of the program's fixed validation inputs,
    in order, the first dimension being the sample; the first ``validation_samples`` (this
    rank's share) are kept and the rest ignored. Scalebench compares them with the same
    outputs of the cell's baseline cell (the baseline branch, or fp32 without switches).
    A no-op unless the cell has ``validate: true``: outputs cost nothing otherwise."""
    channel = _get()
    path = os.environ.get(_OUTPUTS_VARIABLE)
    if channel.stream is None or not path:
        return
    left = _validation_samples() - channel.output_samples
    if left <= 0:
        return
    array = _as_float32(values)
    if array.ndim == 0:
        array = array.reshape(1)
    array = array[:left]
    with open(path, "ab" if channel.output_samples else "wb") as stream:
        stream.write(array.tobytes())
    channel.output_samples += int(array.shape[0])
    channel.write(
        {
            "type": "outputs",
            "samples": int(array.shape[0]),
            "shape": list(array.shape[1:]),
        }
    )


def outputs_at_exit(values) -> None:
    """Hands `values` (as ``outputs``) when the program exits, unless it handed outputs of its
    own by then: what an adapter takes for the accuracy check without the program's help
    (scalebench_client.lightning_outputs, Note [Lightning outputs]) never replaces the program's."""
    global _outputs_at_exit
    _outputs_at_exit = values


_outputs_at_exit = None


def memory() -> None:
    """Reports the peak and current memory: torch's CUDA allocator when a GPU is in use,
    else this process's peak and current resident set (/proc/self/status). Once profiled
    steps began (docs/profiles.md#program-cells), the figures taken just before them: the
    profiler's own memory is not the program's."""
    channel = _get()
    if channel.stream is None:
        return
    kept = _profile.memory if _profile is not None else None
    channel.write(dict(kept) if kept is not None else _memory_record())


def _memory_record() -> dict:
    """The memory record of ``memory()`` for now."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        kind = "cuda"
        peak, current = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    else:
        kind = "rss"
        peak, current = _resident_set_bytes()
    return {
        "type": "memory",
        "kind": kind,
        "peak_bytes": int(peak),
        "current_bytes": int(current),
    }


def report_memory(kind: str, peak_bytes: int, current_bytes: int) -> None:
    """Reports memory measured by an adapter: ``kind`` "cuda" for a device allocator's peak
    (stored as peak_allocated_bytes), "rss" for a resident set (peak_rss_bytes)."""
    _get().write(
        {
            "type": "memory",
            "kind": kind,
            "peak_bytes": peak_bytes,
            "current_bytes": current_bytes,
        }
    )


def _resident_set_bytes() -> tuple[int, int]:
    """(peak, current) resident set of this process: VmHWM and VmRSS of /proc/self/status.
    Not getrusage's ru_maxrss: Linux carries it across execve, so a program spawned by a
    large process (the worker, with LibTorch loaded) would report its parent's peak."""
    values = {}
    try:  # not a parenthesised `with` of two managers: that needs Python 3.10
        with open("/proc/self/status") as status:
            for line in status:
                name, _, rest = line.partition(":")
                if name in ("VmHWM", "VmRSS"):
                    values[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        values.clear()
    if "VmHWM" not in values:  # not Linux: the best there is
        import resource

        scale = 1 if sys.platform == "darwin" else 1024
        values["VmHWM"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    return values["VmHWM"], values.get("VmRSS", values["VmHWM"])


def error(exception: BaseException) -> None:
    """Reports an exception with its class: out-of-memory errors of PyTorch, TensorFlow and
    JAX as ``oom``. ``run`` calls it; call it yourself around your own handling."""
    text = f"{type(exception).__name__}: {exception}"
    oom = (
        type(exception).__name__
        in ("OutOfMemoryError", "ResourceExhaustedError", "MemoryError")
        or "RESOURCE_EXHAUSTED" in text
        or "CUDA out of memory" in text
    )
    _get().write(
        {"type": "error", "kind": "oom" if oom else "error", "message": text[:4000]}
    )


def ended(by: str, message: str) -> None:
    """Says what ended the program's steps (an ``ended`` record): `by` one of
    ``max_steps``, ``max_epochs``, ``max_time``, ``early_stopping``, ``interrupted``,
    ``no_batches`` or ``other``, and a sentence with the figures. Adapters call it
    (scalebench_client.lightning reads the trainer's limits); the worker names it when the
    steps run differ from those asked."""
    _get().write({"type": "ended", "by": str(by), "message": str(message)[:4000]})


def emit_segment(name: str, begin_ns: int, end_ns: int) -> None:
    """A named span of the run outside (or around) its steps, in ``time.monotonic_ns()``: a
    ``segment`` record (Note [Run-level segments], docs/programs.md#run-level-segments). The
    worker sums the time and counts the occurrences per name. Adapters call it
    (scalebench_client.lightning: setup, sanity check, each validation loop, checkpoint
    saves, ...)."""
    _get().write(
        {
            "type": "segment",
            "name": str(name),
            "begin_ns": int(begin_ns),
            "end_ns": int(end_ns),
        }
    )


class _Segment:
    __slots__ = ("begin", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.begin = 0

    def __enter__(self) -> None:
        self.begin = _monotonic_ns()

    def __exit__(self, *exc) -> None:
        emit_segment(self.name, self.begin, _monotonic_ns())


def segment(name: str) -> _Segment:
    """Times the ``with`` block as the segment `name` (``with sb.segment("evaluation"):``):
    the parts of a run outside its steps that a plain program wants named (data setup,
    evaluation, saving). A no-op record when not started by scalebench."""
    return _Segment(name)


def report_code() -> None:
    """Reports which code of the branch's tree the program ran (the ``code`` record,
    scalebench_client.code_identity). ``finish`` calls it."""
    channel = _get()
    if channel.stream is None:
        return
    from . import code_identity

    tree = os.environ.get(_TREE_VARIABLE) or _START_CWD
    try:
        record = code_identity.code_record(tree)
    except (OSError, ValueError) as exception:  # never fail the program over its report
        record = {
            "type": "code",
            "tree": tree,
            "error": f"{type(exception).__name__}: {exception}",
        }
    channel.write(record)


def finish() -> None:
    """Ends the report with the code record (report_code) and a summary record (the
    number of steps) and closes the channel; later calls of this module are no-ops. Called
    at exit if the program did not."""
    channel = _get()
    if channel.stream is None:
        return
    if _profile is not None:
        _profile.close()
    if _outputs_at_exit is not None and channel.output_samples == 0:
        outputs(_outputs_at_exit)
    report_code()
    channel.write({"type": "summary", "steps": channel.steps})
    channel.stream.close()
    channel.stream = None


def _excepthook(kind, value, traceback) -> None:
    error(value)
    _previous_excepthook(kind, value, traceback)


_previous_excepthook = sys.excepthook
if os.environ.get(_FD_VARIABLE):
    import atexit

    sys.excepthook = _excepthook
    atexit.register(finish)
