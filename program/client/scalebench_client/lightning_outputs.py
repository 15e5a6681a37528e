"""The outputs of a Lightning module for the accuracy check across cells, taken by the
adapter (``scalebench_client.lightning``) without the program's help.

Note [Lightning outputs]: in a training cell with ``validate: true`` the adapter takes the
outputs for the accuracy check across cells itself (docs/accuracy.md#across-cells), so a
program needs no ``scalebench_client.outputs`` call: at the end of training it draws the
first batch of the first validation dataloader (else the training one; torch's random state
forked and seeded, so a shuffled loader gives the same batch on every branch), moves it to the
device as Lightning does, and runs the module's ``validation_step`` (else ``predict_step``,
else ``forward`` on the batch's inputs: the batch, or its first element) on it in eval mode,
without gradients, in the trainer's precision context, with ``self.log`` silenced. The
outputs are what the module's ``forward`` returned in that call (the first call), or, when
the step never calls ``forward`` (a model that calls its submodules itself), the per-sample
tensors the step returned, else what the last of its first-level submodules that returned
per-sample tensors gave (CytoDL's ``validation_step`` returns losses and, only on some
epochs, post-processed uint8 images; it calls its ``backbone``, whose features are taken);
each tensor flattened per sample and side by side. They are handed
at exit, and only if the program handed none itself: a program's own outputs always win.
Where there is nothing to take, stderr says why (the program's output tail).
"""

from __future__ import annotations

import sys

import scalebench_client as sb


def _first_batch(trainer):
    """The first batch of the first validation dataloader, else of the training one, drawn
    with torch's random state forked and seeded, so that a shuffled loader gives the same
    batch on every branch (Note [Lightning outputs]); None when there is none."""
    import torch

    for loaders in (trainer.val_dataloaders, trainer.train_dataloader):
        loader = (
            loaders[0] if isinstance(loaders, (list, tuple)) and loaders else loaders
        )
        if loader is None:
            continue
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            try:
                return next(iter(loader))
            except (StopIteration, TypeError):
                continue
    return None


def _tensors(value) -> list:
    """The tensors of a step's output: a tensor, or those in a dict (by key), list or tuple."""
    if hasattr(value, "detach") and hasattr(value, "shape"):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in _tensors(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _per_sample(values):
    """One float32 row per sample: every tensor whose first dimension is the first tensor's
    (the batch), flattened per sample and side by side; None when there is none."""
    import torch

    tensors = [t for t in _tensors(values) if t.dim() >= 1]
    if not tensors:
        return None
    batch = tensors[0].shape[0]
    rows = [
        t.detach().float().reshape(batch, -1) for t in tensors if t.shape[0] == batch
    ]
    return torch.cat(rows, dim=1).cpu()


def _no_log(*args, **kwargs) -> None:
    return None


def fixed_batch_outputs(trainer, module):
    """(outputs, why not): the module's outputs on a fixed batch (Note [Lightning outputs]),
    per sample, or None and the reason."""
    import torch

    batch = _first_batch(trainer)
    if batch is None:
        return None, "the trainer has no validation or training dataloader"
    batch = trainer.strategy.batch_to_device(batch)
    steps = [
        name for name in ("validation_step", "predict_step") if _overrides(module, name)
    ]
    inputs = batch[0] if isinstance(batch, (list, tuple)) and batch else batch
    if steps:
        what = steps[0]
        call = lambda: getattr(module, what)(batch, 0)
    elif hasattr(inputs, "shape"):
        what = "forward"
        call = lambda: module(inputs)
    else:
        return None, (
            "the module overrides neither validation_step nor predict_step, and its batch "
            "is not a tensor or (inputs, ...)"
        )
    captured: list = []
    handles = [module.register_forward_hook(lambda _m, _a, out: captured.append(out))]
    # A step that calls its submodules itself (CytoDL's backbone, then its heads' forward
    # methods): what its first-level submodules returned, in call order.
    from_children: list = []
    for child in module.children():
        handles.append(
            child.register_forward_hook(lambda _m, _a, out: from_children.append(out))
        )
    was_training = module.training
    module.eval()
    module.log, module.log_dict = _no_log, _no_log  # no loop collects them here
    try:
        with torch.no_grad(), trainer.precision_plugin.forward_context():
            returned = call()
    finally:
        for handle in handles:
            handle.remove()
        del module.log, module.log_dict
        module.train(was_training)
    # forward's first output; without a forward call, the step's return, then the submodules'
    # outputs from the last one called.
    candidates = [captured[0]] if captured else [returned, *reversed(from_children)]
    values = next((v for v in map(_per_sample, candidates) if v is not None), None)
    if values is None:
        return None, (
            f"{what} gave no per-sample tensor, called no forward and no submodule that "
            "returned one"
        )
    return values, ""


def _overrides(module, name: str) -> bool:
    try:
        from lightning.pytorch.utilities.model_helpers import is_overridden
    except ImportError:
        from pytorch_lightning.utilities.model_helpers import is_overridden
    return is_overridden(name, module)


def hand_outputs_at_exit(trainer, module) -> None:
    """Note [Lightning outputs]: a no-op unless the cell has ``validate: true``."""
    if not sb.wants_outputs():
        return
    try:
        values, why = fixed_batch_outputs(trainer, module)
    except Exception as exception:  # noqa: BLE001 (never fail the user's program over the check)
        values, why = None, f"{type(exception).__name__}: {exception}"
    if values is None:
        print(
            f"scalebench_client.lightning: no outputs for the accuracy check: {why}; "
            "hand them with scalebench_client.outputs (docs/accuracy.md#across-cells)",
            file=sys.stderr,
        )
        return
    sb.outputs_at_exit(values)
