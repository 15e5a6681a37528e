"""PyTorch Lightning adapter: per-step phases of ``Trainer.fit`` with the user's code untouched
(docs/programs.md#lightning).

Installed with the client, this module is registered under Lightning's entry point
``lightning.pytorch.callbacks_factory`` (and ``pytorch_lightning.callbacks_factory`` for the
standalone package), so every ``Trainer`` created in a program started by scalebench gets
``ScalebenchCallback``; started any other way the factory returns no callback.

At ``setup`` the callback wraps the trainer's profiler (whatever the user chose, Lightning's
``PassThroughProfiler`` by default, which it keeps calling) in ``PhaseProfiler``, which sees
the actions Lightning brackets in its training loop and turns them into phases:

==================================================  ==========
Lightning action                                     phase
==================================================  ==========
``[_TrainingEpochLoop].train_dataloader_next``       data
``[Strategy]<S>.batch_to_device``                    h2d
``[Strategy]<S>.training_step``                      forward
``[LightningModule]<M>.optimizer_zero_grad``         zero_grad
``[Strategy]<S>.backward``                           backward
the rest of ``[LightningModule]<M>.optimizer_step``  optimizer
  after its closure (forward, zero_grad, backward)
every other ``[Callback]``/``[LightningModule]``     hooks
  hook called in the step outside those phases
  (``on_before_backward``, ``on_train_batch_start``,
  ``on_before_optimizer_step``, ...), summed
==================================================  ==========

At the end of ``fit`` the callback reports what ended the steps (``ended_by``: max_steps,
max_epochs, EarlyStopping, ...), which the worker names when the program ran fewer or more
steps than asked (docs/programs.md#steps-asked-and-run).

A step begins where the batch is fetched and ends with ``run_training_batch``; the
``on_train_batch_end`` hooks (progress bar, logging) run between steps. Validation, the
sanity check and prediction fall outside the steps and are not reported. A phase that runs
twice in one step (several optimizers) is reported once, from its first begin, for its
summed duration.

Nothing here synchronises a GPU unless ``SCALEBENCH_SYNC_PHASES=1`` (an ``env:`` of the
program): then each phase boundary waits for the device (``torch.cuda.synchronize``), so a
phase's time is its GPU time, at the cost of a stall per boundary (about 10-50 us each, and
the loss of CPU/GPU overlap). Without it, like Lightning's own SimpleProfiler, phases are host
times: a kernel launched in ``forward`` may be paid for in whichever later phase waits.
"""

from __future__ import annotations

import os
import time

import scalebench_client as sb

_monotonic_ns = time.monotonic_ns

#: Phase of a ``[Strategy]`` or ``[LightningModule]`` hook.
_HOOK_PHASES = {
    "batch_to_device": "h2d",
    "training_step": "forward",
    "backward": "backward",
    "optimizer_zero_grad": "zero_grad",
}
_DATA_ACTION_SUFFIX = "].train_dataloader_next"
_BATCH_ACTION = "run_training_batch"
_OPTIMIZER_HOOK = "optimizer_step"


def _phase_of(action: str) -> str | None:
    if action.endswith(_DATA_ACTION_SUFFIX):
        return "data"
    if action.startswith(("[Strategy]", "[LightningModule]", "[Callback]")):
        hook = action.rpartition(".")[2]
        if action.startswith("[LightningModule]") and hook == _OPTIMIZER_HOOK:
            return _OPTIMIZER_HOOK
        if action.startswith("[Strategy]") or hook == "optimizer_zero_grad":
            return _HOOK_PHASES.get(hook)
        return "hooks"
    return None


class _StepState:
    """The step being assembled from the profiler's actions."""

    __slots__ = ("begin", "closure_end", "open", "optimizer_begin", "phases")

    def __init__(self) -> None:
        self.begin = 0
        self.phases: dict[str, list[int]] = {}
        self.open: dict[str, int] = {}
        self.optimizer_begin = 0
        self.closure_end = 0

    def start(self, phase: str, now: int) -> None:
        if phase == _OPTIMIZER_HOOK:
            self.optimizer_begin = now
            self.closure_end = now
        elif (
            phase != "hooks" or not self.open
        ):  # a hook inside another phase is that phase's
            self.open.setdefault(phase, now)

    def stop(self, phase: str, now: int) -> None:
        if phase == _OPTIMIZER_HOOK:
            # The optimizer's own update: what follows the closure inside optimizer_step.
            self._add("optimizer", max(self.closure_end, self.optimizer_begin), now)
            return
        if phase == "hooks" and len(self.open) > 1:
            return  # the hook of a hook (or inside another phase): counted by the outer one
        begin = self.open.pop(phase, None)
        if begin is None:
            return
        self._add(phase, begin, now)
        if phase in ("forward", "zero_grad", "backward", "hooks"):
            self.closure_end = now

    def _add(self, phase: str, begin: int, end: int) -> None:
        span = self.phases.get(phase)
        if span is None:
            self.phases[phase] = [begin, end]
        else:  # again in the same step: its first begin, the summed duration
            span[1] += end - begin


def _profiler_base():
    try:
        from lightning.pytorch.profilers import Profiler
    except ImportError:  # the standalone pytorch_lightning package
        from pytorch_lightning.profilers import Profiler
    return Profiler


def make_phase_profiler(inner):
    """A Lightning profiler that reports the phases of each training step to scalebench and
    forwards every action to `inner` (the trainer's own profiler)."""
    base = _profiler_base()

    class PhaseProfiler(base):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            self.sync = os.environ.get("SCALEBENCH_SYNC_PHASES") == "1"
            self.step: _StepState | None = None

        def start(self, action_name: str) -> None:
            phase = _phase_of(action_name)
            if phase is not None or action_name == _BATCH_ACTION:
                if self.sync:
                    sb._synchronize()
                now = _monotonic_ns()
                if self.step is None and (
                    phase == "data" or action_name == _BATCH_ACTION
                ):
                    self.step = _StepState()
                    self.step.begin = now
                if self.step is not None and phase is not None:
                    self.step.start(phase, now)
            self.inner.start(action_name)

        def stop(self, action_name: str) -> None:
            self.inner.stop(action_name)
            phase = _phase_of(action_name)
            if self.step is None or (phase is None and action_name != _BATCH_ACTION):
                return
            if self.sync:
                sb._synchronize()
            now = _monotonic_ns()
            if phase is not None:
                self.step.stop(phase, now)
            if action_name == _BATCH_ACTION:
                step, self.step = self.step, None
                sb.emit_step(
                    step.begin, now, {k: tuple(v) for k, v in step.phases.items()}
                )

        # The rest is the inner profiler's (its report, files and teardown).
        def setup(self, *args, **kwargs) -> None:
            self.inner.setup(*args, **kwargs)

        def teardown(self, *args, **kwargs) -> None:
            self.inner.teardown(*args, **kwargs)

        def describe(self) -> None:
            self.inner.describe()

        def summary(self) -> str:
            return self.inner.summary()

        def __getattr__(self, name: str):
            inner = self.__dict__.get("inner")
            if inner is None:
                raise AttributeError(name)
            return getattr(inner, name)

    return PhaseProfiler()


def _class_names(obj) -> set:
    return {cls.__name__ for cls in type(obj).__mro__}


def ended_by(trainer) -> tuple[str, str]:
    """What ended ``Trainer.fit``'s steps, as ``fit_loop.done`` decides it (the order of its
    checks), and a sentence with the trainer's limits: (`by`, message) for
    ``scalebench_client.ended``. `by` is ``interrupted``, ``no_batches``, ``max_steps``,
    ``max_epochs``, ``early_stopping``, ``max_time`` or ``other``."""
    loop = trainer.fit_loop
    steps = int(trainer.global_step)
    epochs = int(loop.epoch_progress.current.processed)
    batches = loop.max_batches
    limits = (
        f"global_step {steps} after {epochs} epoch(s); max_steps={trainer.max_steps}, "
        f"max_epochs={trainer.max_epochs}, {batches} batches an epoch "
        f"(limit_train_batches={trainer.limit_train_batches}), "
        f"accumulate_grad_batches={trainer.accumulate_grad_batches}"
    )
    max_epochs = trainer.max_epochs
    if trainer.interrupted:
        return "interrupted", "the fit was interrupted; " + limits
    if batches == 0 or trainer.limit_train_batches == 0:
        return "no_batches", "the training dataloader has no batches; " + limits
    if trainer.max_steps not in (None, -1) and steps >= trainer.max_steps:
        return "max_steps", f"max_steps={trainer.max_steps} reached; " + limits
    if max_epochs not in (None, -1) and epochs >= max_epochs:
        return "max_epochs", f"max_epochs={max_epochs} reached; " + limits
    if trainer.should_stop:
        for callback in trainer.callbacks:
            names = _class_names(callback)
            if "EarlyStopping" in names and getattr(callback, "stopped_epoch", 0):
                return "early_stopping", (
                    f"EarlyStopping (monitor {getattr(callback, 'monitor', '?')}) stopped "
                    f"the fit in epoch {callback.stopped_epoch}; " + limits
                )
            if "Timer" in names:
                return (
                    "max_time",
                    "the Timer callback (max_time) stopped the fit; " + limits,
                )
        return (
            "other",
            "trainer.should_stop was set (by a callback or the module); " + limits,
        )
    return "other", limits


def _callback_class(base):
    class ScalebenchCallback(base):
        """Reports Trainer.fit's steps, final metrics and memory to scalebench."""

        def setup(self, trainer, pl_module, stage: str) -> None:
            if stage == "fit" and not getattr(trainer.profiler, "_scalebench", False):
                profiler = make_phase_profiler(trainer.profiler)
                profiler._scalebench = True
                trainer.profiler = profiler

        def on_train_end(self, trainer, pl_module) -> None:
            sb.ended(*ended_by(trainer))
            for name, value in trainer.callback_metrics.items():
                try:
                    number = float(value)
                except (TypeError, ValueError):
                    continue
                sb.metric("loss" if name in ("loss", "train_loss") else name, number)
            sb.memory()

        def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
            sb.error(exception)

    return ScalebenchCallback


def callbacks() -> list:
    """Entry point ``lightning.pytorch.callbacks_factory``: the callback when the program was
    started by scalebench, else none."""
    if not os.environ.get("SCALEBENCH_REPORT_FD"):
        return []
    from lightning.pytorch import Callback

    return [_callback_class(Callback)()]


def pytorch_lightning_callbacks() -> list:
    """Entry point ``pytorch_lightning.callbacks_factory`` (the standalone package)."""
    if not os.environ.get("SCALEBENCH_REPORT_FD"):
        return []
    from pytorch_lightning import Callback

    return [_callback_class(Callback)()]
