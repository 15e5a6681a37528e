"""Keras adapter (docs/programs.md#keras): per-batch times of ``fit`` and ``predict`` from a
callback, for Keras 3 on any backend and for ``tf.keras``.

Keras calls its callbacks around each batch of ``fit`` (``on_train_batch_begin/end``) and
``predict`` (``on_predict_batch_begin/end``). A step is one batch, from the end of the
previous batch to the end of this one, with two phases:

* ``data``: the loop's time between the batches, fetching the next batch from the dataset
  (and any other callback's work);
* ``train_step`` (``predict_step``): Keras's compiled step on the batch.

A training cell (``SCALEBENCH_MODE=train``) reports the batches of ``fit``, an inference cell
those of ``predict``; the other loop runs unreported.

At the end of a batch the adapter reads the batch's loss (``float(logs["loss"])``), which
waits for the step's result: the step's time is its computation, not its dispatch. (Keras's
own progress bar reads it too.) With ``steps_per_execution > 1`` Keras runs that many
batches per call and the callbacks fire once per call: each step record is then that many
batches, and the adapter warns once.

Use it without editing the program: ``python -m scalebench_client train.py ...`` runs the
script with this callback added to every ``fit``/``predict`` (scalebench_client/__main__.py);
or pass ``callbacks=[scalebench_client.keras.callback()]`` yourself.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import scalebench_client as sb

_monotonic_ns = time.monotonic_ns

# docs/profiles.md#program-cells: the operator profiles of program cells are torch.profiler's.
sb.profile_unsupported(
    "the Keras adapter takes no operator profiles (its steps are timed from Keras's batch "
    "callbacks, and operator profiles use torch.profiler); profile a Keras program with its "
    "backend's profiler"
)


def _keras():
    """The Keras in use: Keras 3 when importable, else tf.keras."""
    try:
        import keras

        return keras
    except ImportError:
        from tensorflow import keras

        return keras


def _memory() -> None:
    """Device memory where the backend reports it, else the resident set."""
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        try:
            gpus = tf.config.list_logical_devices("GPU")
            if gpus:
                info = tf.config.experimental.get_memory_info(gpus[0].name)
                sb.report_memory("cuda", int(info["peak"]), int(info["current"]))
                return
        except (ValueError, RuntimeError):
            pass
    if "jax" in sys.modules:
        from scalebench_client import jax as sbj

        sbj.memory()
        return
    sb.memory()


def callback():
    """A ``keras.callbacks.Callback`` reporting each train and predict batch to scalebench."""
    keras = _keras()

    class ScalebenchCallback(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._loop = (
                "predict" if os.environ.get("SCALEBENCH_MODE") == "infer" else "train"
            )
            self._previous_end = None
            self._begin = None
            self._warned = False

        def _loop_begin(self) -> None:
            self._previous_end = _monotonic_ns()
            executions = getattr(self.model, "steps_per_execution", 1)
            executions = int(getattr(executions, "numpy", lambda: executions)())
            if executions > 1 and not self._warned:
                self._warned = True
                warnings.warn(
                    f"scalebench: steps_per_execution = {executions}: Keras calls callbacks "
                    f"once per {executions} batches, so each reported step is "
                    f"{executions} batches",
                    stacklevel=2,
                )

        def _batch_begin(self) -> None:
            self._begin = _monotonic_ns()

        def _batch_end(self, logs, phase: str) -> None:
            if not phase.startswith(self._loop):
                return
            if logs and "loss" in logs:
                float(logs["loss"])  # the step's result exists: it is done
            end = _monotonic_ns()
            begin = self._begin if self._begin is not None else end
            previous = self._previous_end if self._previous_end is not None else begin
            sb.emit_step(
                previous, end, {"data": (previous, begin), phase: (begin, end)}
            )
            self._previous_end = end

        def on_train_begin(self, logs=None) -> None:
            self._loop_begin()

        def on_epoch_begin(self, epoch, logs=None) -> None:
            self._previous_end = _monotonic_ns()

        def on_train_batch_begin(self, batch, logs=None) -> None:
            self._batch_begin()

        def on_train_batch_end(self, batch, logs=None) -> None:
            self._batch_end(logs, "train_step")

        def on_train_end(self, logs=None) -> None:
            for name, value in (logs or {}).items():
                try:
                    sb.metric(name, float(value))
                except (TypeError, ValueError):
                    continue
            _memory()

        def on_predict_begin(self, logs=None) -> None:
            self._loop_begin()

        def on_predict_batch_begin(self, batch, logs=None) -> None:
            self._batch_begin()

        def on_predict_batch_end(self, batch, logs=None) -> None:
            self._batch_end(None, "predict_step")

        def on_predict_end(self, logs=None) -> None:
            _memory()

    return ScalebenchCallback()


def install() -> None:
    """Adds the callback to every ``fit`` and ``predict`` of ``keras.Model`` (what
    ``python -m scalebench_client`` does for a Keras program)."""
    keras = _keras()
    model = keras.Model
    if getattr(model, "_scalebench_installed", False):
        return

    def wrap(method):
        def wrapped(self, *args, **kwargs):
            callbacks = list(kwargs.pop("callbacks", None) or [])
            callbacks.append(callback())
            return method(self, *args, callbacks=callbacks, **kwargs)

        wrapped.__wrapped__ = method
        return wrapped

    model.fit = wrap(model.fit)
    model.predict = wrap(model.predict)
    model._scalebench_installed = True
