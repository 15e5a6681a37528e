"""Export a PyTorch module for scalebench's C++ workers (docs/own-model.md):

    python -m scalebench_client.export --factory mypkg.models:build --input-shape 3 224 224 \\
        --aoti build/model.pt2 --torchscript build/model.pt [--checkpoint last.ckpt]

builds the module with ``factory`` (``module:function``, called with the ``--factory-kwargs``
JSON object; the module is imported from the current directory), loads a checkpoint if asked
(a plain ``torch.save`` state dict, or a Lightning ``.ckpt`` whose ``state_dict`` entries carry
the ``--checkpoint-prefix``, default ``model.``, which is stripped), switches it to eval mode,
and writes:

* ``--aoti PATH``: an AOTInductor package (``torch.export.export`` then
  ``torch._inductor.aoti_compile_and_package``) for ``--device``, with the batch dimension
  dynamic (``--dynamic-batch``, the default) or fixed at ``--batch``. The package's metadata
  records ``scalebench.input_shape`` (-1 = dynamic) and ``scalebench.flops_per_sample``, so a
  worker refusing a batch names the exported shape.
* ``--torchscript PATH``: ``torch.jit.trace`` of the same module (deprecated by PyTorch in
  favour of torch.export; kept for LibTorch builds without the AOTInductor loader).
* ``PATH.json`` next to each: the input shape, the batch rule and ``flops_per_sample``
  (``torch.utils.flop_counter.FlopCounterMode`` over one forward of the example batch,
  divided by its batch size: model FLOPs as MFU counts them, no recomputation).

The compile axis (docs/optimizations.md#compilation) exports the Python twin of a zoo model
instead of a factory's module, with the weights rank 0 wrote from the C++ model:

    python -m scalebench_client.export --zoo resnet18 --state state.pt \
        --input-shape 3 224 224 --num-classes 1000 --aoti model.pt2

(``--state``: a name -> tensor dict, loaded strictly: a twin that drifted from its C++ model
names the entries that do not match).

Prints one line per file written. A wrong argument or a checkpoint that does not fit says
which and what to change, and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys


def _fail(message: str) -> None:
    print(f"scalebench_client.export: {message}", file=sys.stderr)
    sys.exit(2)


def _factory(spec: str):
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        _fail(
            f"--factory {spec!r}: write module:function, e.g. mypkg.models:build_model"
        )
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        _fail(f"--factory {spec!r}: cannot import {module_name!r} ({error})")
    if not hasattr(module, function):
        _fail(f"--factory {spec!r}: module {module_name!r} has no {function!r}")
    return getattr(module, function)


def _state_dict(path: str, prefix: str) -> dict:
    import torch

    loaded = torch.load(path, map_location="cpu", weights_only=False)
    if isinstance(loaded, dict) and "state_dict" in loaded:  # a Lightning checkpoint
        state = loaded["state_dict"]
        if prefix and any(k.startswith(prefix) for k in state):
            state = {
                k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)
            }
        return state
    if isinstance(loaded, dict):
        return loaded
    _fail(
        f"--checkpoint {path}: holds a {type(loaded).__name__}, not a state dict or a "
        "Lightning checkpoint; save model.state_dict()"
    )
    return {}


def _zoo_twin(args):
    """The Python twin of zoo model ``args.zoo`` with the weights of ``args.state``."""
    import torch
    import torch.jit._pickle

    from . import zoo

    if args.zoo not in zoo.NAMES:
        _fail(f"--zoo {args.zoo!r}: no such zoo model; known: {', '.join(zoo.NAMES)}")
    if not args.state or args.num_classes is None:
        _fail("--zoo needs --state FILE (the weights) and --num-classes N")
    if args.checkpoint:
        _fail("--zoo takes its weights from --state; remove --checkpoint")
    model = zoo.build(args.zoo, args.input_shape, args.num_classes)
    # torch::pickle_save tags a C++ dict with its type: the one global it needs.
    tags = [torch.jit._pickle.restore_type_tag]
    try:
        with torch.serialization.safe_globals(tags):
            state = torch.load(args.state, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file is the same answer
        _fail(f"--state {args.state}: not a file torch.load reads ({error})")
    try:
        model.load_state_dict(dict(state), strict=True)
    except RuntimeError as error:
        _fail(
            f"--state {args.state} does not fit the Python twin of {args.zoo} (the twin in "
            f"scalebench_client/zoo.py drifted from worker/models/): {error}"
        )
    return model


def flops_per_sample(model, example) -> float:
    """Model FLOPs of one forward of `example`, divided by its batch size."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(example)
    return counter.get_total_flops() / example.shape[0]


def _write_sidecar(path: str, facts: dict) -> None:
    with open(path + ".json", "w") as out:
        json.dump(facts, out, indent=2)
        out.write("\n")
    print(f"wrote {path}.json")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scalebench_client.export")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--factory", help="module:function building the model")
    source.add_argument(
        "--zoo", help="a zoo model's Python twin (scalebench_client.zoo) instead"
    )
    parser.add_argument(
        "--state",
        help="--zoo: the weights, a name -> tensor dict (required with --zoo)",
    )
    parser.add_argument(
        "--num-classes",
        type=int,
        help="--zoo: the model's classes (required with --zoo)",
    )
    parser.add_argument(
        "--factory-kwargs", default="{}", help="JSON object of its arguments"
    )
    parser.add_argument("--input-shape", type=int, nargs="+", required=True)
    parser.add_argument(
        "--batch", type=int, default=4, help="example batch (and the fixed one)"
    )
    parser.add_argument("--static-batch", action="store_true", help="no dynamic batch")
    parser.add_argument("--checkpoint", help="state dict or Lightning .ckpt to load")
    parser.add_argument("--checkpoint-prefix", default="model.")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--aoti", help="AOTInductor package to write (.pt2)")
    parser.add_argument("--torchscript", help="TorchScript file to write (.pt)")
    args = parser.parse_args(argv)
    if not args.aoti and not args.torchscript:
        _fail("nothing to write: give --aoti PATH and/or --torchscript PATH")
    if args.batch < 2 and not args.static_batch:
        _fail(
            "--batch must be at least 2 for a dynamic batch (torch.export specialises 1)"
        )
    try:
        kwargs = json.loads(args.factory_kwargs)
    except json.JSONDecodeError as error:
        _fail(f"--factory-kwargs is not JSON: {error}")
    if not isinstance(kwargs, dict):
        _fail("--factory-kwargs must be a JSON object")

    import torch

    for path in (args.aoti, args.torchscript):
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if args.zoo:
        model = _zoo_twin(args)
    else:
        model = _factory(args.factory)(**kwargs)
    if args.checkpoint:
        missing, unexpected = model.load_state_dict(
            _state_dict(args.checkpoint, args.checkpoint_prefix), strict=False
        )
        if missing or unexpected:
            _fail(
                f"--checkpoint {args.checkpoint} does not fit the model: missing "
                f"{missing[:5]}, unexpected {unexpected[:5]}; check --checkpoint-prefix"
            )
    model = model.eval().to(args.device)
    if args.zoo:
        from . import zoo

        example = zoo.example_input(args.zoo, args.batch, args.input_shape, args.device)
    else:
        example = torch.randn(args.batch, *args.input_shape, device=args.device)
    flops = flops_per_sample(model, example)
    dynamic = not args.static_batch
    facts = {
        "input_shape": args.input_shape,
        "exported_shape": [-1 if dynamic else args.batch, *args.input_shape],
        "flops_per_sample": flops,
        "device": args.device,
        "torch": torch.__version__,
    }
    if args.aoti:
        shapes = (
            ({0: torch.export.Dim("batch", min=1, max=1 << 20)},) if dynamic else None
        )
        program = torch.export.export(model, (example,), dynamic_shapes=shapes)
        metadata = {
            "scalebench.input_shape": json.dumps(facts["exported_shape"]),
            "scalebench.flops_per_sample": repr(flops),
        }
        path = torch._inductor.aoti_compile_and_package(
            program,
            package_path=args.aoti,
            inductor_configs={"aot_inductor.metadata": metadata},
        )
        print(f"wrote {path}")
        _write_sidecar(args.aoti, facts)
    if args.torchscript:
        with torch.no_grad():
            traced = torch.jit.trace(model, example)
        torch.jit.save(traced, args.torchscript)
        print(f"wrote {args.torchscript}")
        _write_sidecar(args.torchscript, facts)


if __name__ == "__main__":
    main()
