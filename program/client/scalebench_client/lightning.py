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
``on_train_batch_end`` hooks (progress bar, logging) run between steps. Validation and the
sanity check of a training cell fall outside the steps and are not reported. A phase that
runs twice in one step (several optimizers) is reported once, from its first begin, for its
summed duration.

Note [Lightning evaluation loops]: in an inference cell (``SCALEBENCH_MODE=infer``) the
profiler is installed for ``Trainer.validate``, ``test`` and ``predict`` instead, and each
batch of their loop is one step with the phases

==================================================  ==========
``[_EvaluationLoop].val_next`` / ``test_next``,      data
``[_PredictionLoop].predict_next``
``[Strategy]<S>.batch_to_device``                    h2d
``[Strategy]<S>.validation_step`` / ``test_step`` /  forward
``predict_step``
hooks before the step (``on_test_batch_start``)      hooks
hooks after it (``on_test_batch_end``: writing       post
outputs, metrics), summed
==================================================  ==========

An evaluation batch has no bracketing action of its own, so it ends where the next batch's
fetch begins (its ``post`` hooks inside it); the loop's last fetch, which finds the
dataloader empty, holds no step and is dropped when the loop ends (``on_test_end``). The
loop then reports ``ended`` by ``dataloader_end`` with the batches it ran and its
``limit_*_batches``.

Note [Lightning segments]: around the steps the callback reports the run-level segments
(docs/programs.md#run-level-segments), each a ``segment`` record, summed per name:

=================  ==========================================================================
``data_setup``     the Trainer's construction (or the previous stage's end) to the callbacks'
                   ``setup`` hook: the strategy's environment (DDP's process group),
                   ``prepare_data`` and the datamodule's ``setup``
``model_setup``    ``setup`` to the stage's start: the module's ``setup`` and
                   ``configure_model``, a checkpoint restored (``ckpt_path``), the strategy's
                   setup (the DDP wrapper, the move to the device, the optimizers)
``sanity_check``   Lightning's validation sanity check
``fit``            ``on_fit_start`` to ``on_fit_end``: the loop with every validation and save
``train``          ``on_train_start`` to ``on_train_end``: the training loop's epochs
``validation``     each validation loop inside ``fit`` (not the sanity check)
``checkpoint_save``  each ``Trainer.save_checkpoint`` (ModelCheckpoint's saves)
``validate``,      the loop of ``Trainer.validate``, ``test``, ``predict``
``test``,
``predict``
=================  ==========================================================================

The worker adds the parts every program has: launch to the first segment (interpreter,
imports, the objects built before the Trainer: the model and data modules, with Hydra the
configuration's composition), launch to the first step, the steps' span and the time after
the last step.

Note [Lightning outputs] (the outputs for the accuracy check across cells, taken without the
program's help) is in ``scalebench_client/lightning_outputs.py``.

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
from scalebench_client.lightning_outputs import hand_outputs_at_exit

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
#: Trainer.save_checkpoint's profiler action (Note [Lightning segments]).
_CHECKPOINT_ACTION = "save_checkpoint"
_OPTIMIZER_HOOK = "optimizer_step"
#: Note [Lightning evaluation loops]: the fetch of an evaluation batch, and its step hooks.
_EVAL_DATA_SUFFIXES = ("].val_next", "].test_next", "].predict_next")
_EVAL_STEP_HOOKS = ("validation_step", "test_step", "predict_step")
#: The stages whose loops an inference cell reports (Trainer.validate, test, predict).
_EVAL_STAGES = ("validate", "test", "predict")
#: Phases that a hook called inside another phase belongs to instead.
_HOOK_LIKE = ("hooks", "post")
#: The profiler scope of a phase whose action is named otherwise (the optimizer's step holds
#: its closure's phases, which are inner scopes: the rest is the optimizer's own).
_SCOPE_NAMES = {_OPTIMIZER_HOOK: "optimizer"}


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


def _eval_phase_of(action: str) -> str | None:
    """The phase of an action inside an evaluation batch (Note [Lightning evaluation loops]);
    hooks are ``hooks`` here, ``post`` once the batch's step ran."""
    if action.endswith(_EVAL_DATA_SUFFIXES):
        return "data"
    if action.startswith("[Strategy]"):
        hook = action.rpartition(".")[2]
        if hook == "batch_to_device":
            return "h2d"
        return "forward" if hook in _EVAL_STEP_HOOKS else None
    if action.startswith(("[LightningModule]", "[Callback]")):
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
            phase not in _HOOK_LIKE or not self.open
        ):  # a hook inside another phase is that phase's
            self.open.setdefault(phase, now)

    def stop(self, phase: str, now: int) -> None:
        if phase == _OPTIMIZER_HOOK:
            # The optimizer's own update: what follows the closure inside optimizer_step.
            self._add("optimizer", max(self.closure_end, self.optimizer_begin), now)
            return
        if phase in _HOOK_LIKE and len(self.open) > 1:
            return  # the hook of a hook (or inside another phase): counted by the outer one
        begin = self.open.pop(phase, None)
        if begin is None:
            return
        self._add(phase, begin, now)
        if phase in ("forward", "zero_grad", "backward", "hooks"):
            self.closure_end = now

    def post_hooks(self, phase: str) -> str:
        """An evaluation batch's hook after its step is post-processing."""
        return "post" if phase == "hooks" and "forward" in self.phases else phase

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


def make_phase_profiler(inner, evaluation: bool = False):
    """A Lightning profiler that reports the phases of each training step to scalebench and
    forwards every action to `inner` (the trainer's own profiler); with `evaluation`, the
    batches of the evaluation loops instead (Note [Lightning evaluation loops])."""
    base = _profiler_base()

    class PhaseProfiler(base):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            self.sync = os.environ.get("SCALEBENCH_SYNC_PHASES") == "1"
            self.evaluation = evaluation
            self.step: _StepState | None = None
            self.batches = 0  # evaluation batches reported
            self.scopes: dict = {}  # action -> its open profiler scopes (profiled steps)
            self.checkpoint_begin = 0  # an open Trainer.save_checkpoint

        def _now(self) -> int:
            """Now, after the device when SCALEBENCH_SYNC_PHASES=1: every phase boundary."""
            if self.sync:
                sb._synchronize()
            return _monotonic_ns()

        def _eval_start(self, action_name: str) -> None:
            phase = _eval_phase_of(action_name)
            if phase is None:
                return
            now = self._now()
            if phase == "data":  # the previous batch ends where this fetch begins
                self.finish_batch(now)
                self.scopes.clear()
                sb.profile_step_begin()  # a profiled batch's scope (its clock is `now`)
                self.step = _StepState()
                self.step.begin = now
            if self.step is not None:
                phase = self.step.post_hooks(phase)
                self._scope_begin(action_name, phase)
                self.step.start(phase, now)

        def _eval_stop(self, action_name: str) -> None:
            phase = _eval_phase_of(action_name)
            if phase is None or self.step is None:
                return
            self.step.stop(self.step.post_hooks(phase), self._now())
            self._scope_end(action_name)

        def finish_batch(self, now: int | None = None) -> None:
            """Reports the evaluation batch being assembled, if its step ran (the loop's
            last fetch, which finds the dataloader empty, holds none and is dropped)."""
            step, self.step = self.step, None
            if step is None or "forward" not in step.phases:
                return
            end = self._now() if now is None else now
            sb.emit_step(step.begin, end, {k: tuple(v) for k, v in step.phases.items()})
            self.batches += 1

        def start(self, action_name: str) -> None:
            if action_name == _CHECKPOINT_ACTION:  # Note [Lightning segments]
                self.checkpoint_begin = _monotonic_ns()
            if self.evaluation:
                self._eval_start(action_name)
                self.inner.start(action_name)
                return
            phase = _phase_of(action_name)
            if phase is not None or action_name == _BATCH_ACTION:
                begins = self.step is None and (
                    phase == "data" or action_name == _BATCH_ACTION
                )
                if begins:  # a profiled step's profiler and scope, before its clock
                    self.scopes.clear()
                    sb.profile_step_begin()
                now = self._now()
                if begins:
                    self.step = _StepState()
                    self.step.begin = now
                if self.step is not None and phase is not None:
                    self._scope_begin(action_name, phase)
                    self.step.start(phase, now)
            self.inner.start(action_name)

        def _scope_begin(self, action_name: str, phase: str) -> None:
            """Opens the profiler scope of a phase that begins (docs/profiles.md#program-cells;
            nothing unless the step is profiled); a hook inside another phase opens none, as
            its time is that phase's."""
            if phase in _HOOK_LIKE and self.step.open:
                return
            scope = sb.profile_phase_begin(_SCOPE_NAMES.get(phase, phase))
            if scope is not None:
                self.scopes.setdefault(action_name, []).append(scope)

        def _scope_end(self, action_name: str) -> None:
            stack = self.scopes.get(action_name) if self.scopes else None
            if stack:
                sb.profile_phase_end(stack.pop())

        def stop(self, action_name: str) -> None:
            self.inner.stop(action_name)
            if action_name == _CHECKPOINT_ACTION and self.checkpoint_begin:
                sb.emit_segment(
                    "checkpoint_save", self.checkpoint_begin, _monotonic_ns()
                )
                self.checkpoint_begin = 0
            if self.evaluation:
                self._eval_stop(action_name)
                return
            phase = _phase_of(action_name)
            if self.step is None or (phase is None and action_name != _BATCH_ACTION):
                return
            now = self._now()
            if phase is not None:
                self.step.stop(phase, now)
                self._scope_end(action_name)
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


def _report_metrics(trainer) -> None:
    for name, value in trainer.callback_metrics.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        sb.metric("loss" if name in ("loss", "train_loss") else name, number)


def _limit_of(trainer, stage: str):
    prefix = {"validate": "val"}.get(stage, stage)
    return prefix, getattr(trainer, f"limit_{prefix}_batches", None)


def _validate_stage(trainer) -> bool:
    """Whether the trainer runs ``Trainer.validate`` (``trainer.validating`` is also true in
    fit's validation loops)."""
    return getattr(trainer.state, "fn", None) == "validate"


def _callback_class(base):
    class ScalebenchCallback(base):
        """Reports Trainer.fit's steps (a training cell) or the batches of Trainer.validate,
        test and predict (an inference cell), the run-level segments around them, final
        metrics and memory to scalebench."""

        def __init__(self) -> None:
            super().__init__()
            # Note [Lightning segments]: made with the Trainer (the callbacks factory).
            self.stage_ready_ns = _monotonic_ns()
            self.open: dict[str, int] = {}

        def _begin(self, name: str) -> None:
            self.open[name] = _monotonic_ns()

        def _end(self, name: str) -> int:
            now = _monotonic_ns()
            begin = self.open.pop(name, None)
            if begin is not None:
                sb.emit_segment(name, begin, now)
            return now

        def setup(self, trainer, pl_module, stage: str) -> None:
            now = _monotonic_ns()
            sb.emit_segment("data_setup", self.stage_ready_ns, now)
            self.open["model_setup"] = now
            evaluation = os.environ.get("SCALEBENCH_MODE") == "infer"
            wanted = stage in _EVAL_STAGES if evaluation else stage == "fit"
            if wanted and not getattr(trainer.profiler, "_scalebench", False):
                profiler = make_phase_profiler(trainer.profiler, evaluation=evaluation)
                profiler._scalebench = True
                trainer.profiler = profiler

        def on_fit_start(self, trainer, pl_module) -> None:
            self._end("model_setup")
            self._begin("fit")

        def on_fit_end(self, trainer, pl_module) -> None:
            self.stage_ready_ns = self._end("fit")

        def on_sanity_check_start(self, trainer, pl_module) -> None:
            self._begin("sanity_check")

        def on_sanity_check_end(self, trainer, pl_module) -> None:
            self._end("sanity_check")

        def on_train_start(self, trainer, pl_module) -> None:
            self._begin("train")

        def on_train_end(self, trainer, pl_module) -> None:
            self._end("train")
            hand_outputs_at_exit(trainer, pl_module)
            sb.ended(*ended_by(trainer))
            _report_metrics(trainer)
            sb.memory()

        def on_validation_start(self, trainer, pl_module) -> None:
            if trainer.sanity_checking:
                return
            if _validate_stage(trainer):  # Trainer.validate: its own stage
                self._end("model_setup")
                self._begin("validate")
            else:  # a validation loop inside fit
                self._begin("validation")

        def on_test_start(self, trainer, pl_module) -> None:
            self._end("model_setup")
            self._begin("test")

        def on_predict_start(self, trainer, pl_module) -> None:
            self._end("model_setup")
            self._begin("predict")

        def _evaluation_end(self, trainer, stage: str) -> None:
            profiler = trainer.profiler
            if not getattr(profiler, "evaluation", False):
                return  # a training cell's validation loop, or no profiler of ours
            profiler.finish_batch()
            prefix, limit = _limit_of(trainer, stage)
            sb.ended(
                "dataloader_end",
                f"the {stage} loop ran out of batches after {profiler.batches} "
                f"(limit_{prefix}_batches={limit})",
            )
            profiler.batches = 0  # the next loop (test, then predict) counts its own
            _report_metrics(trainer)
            sb.memory()

        def on_validation_end(self, trainer, pl_module) -> None:
            if trainer.sanity_checking:
                return
            if _validate_stage(trainer):
                self.stage_ready_ns = self._end("validate")
            else:
                self._end("validation")
            self._evaluation_end(trainer, "validate")

        def on_test_end(self, trainer, pl_module) -> None:
            self.stage_ready_ns = self._end("test")
            self._evaluation_end(trainer, "test")

        def on_predict_end(self, trainer, pl_module) -> None:
            self.stage_ready_ns = self._end("predict")
            self._evaluation_end(trainer, "predict")

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
