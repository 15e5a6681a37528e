"""Makes a replay layer table (docs/replay.md) by timing a real model's layers.

    python docs/examples/replay/make_table.py resnet50 -o resnet50.json
    python docs/examples/replay/make_table.py transformer -o transformer.json

The model runs forward and backward on this machine's CPU (one thread by default); each
layer's forward is timed with forward hooks (a layer owns the time from the end of the
previous layer with parameters to its own end: activations and pooling between them
included), its backward from the moment its gradients are complete (post-accumulate-grad
hooks on its parameters: when DDP would mark them ready) to the moment the previous layer's
are. The median over the measured steps is written. `--time-scale` multiplies every time
(a device k times faster than this CPU: 1/k), `--jitter` sets the table's per-iteration
jitter (Note [Replay workload]).

    python docs/examples/replay/make_table.py --rescale resnet50.json --time-scale 0.05 \
        --parameter-scale 0.125 -o resnet50_fast.json

rescales a table: the same layers and bucket pattern at another device speed and 1/8 of the
gradient bytes (what a 2-core machine can reduce between eight ranks).

The models are the scalebench zoo's: `resnet50` has torchvision's ResNet-50 parameters
(25,557,032 in 161 tensors, model order), `transformer` the zoo's encoder (6 blocks,
d_model 512, vocabulary 30522, 2 classes; 34,609,154 parameters in 78 tensors).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

import torch
from torch import nn


def _bottleneck(inplanes: int, planes: int, stride: int) -> nn.Module:
    class Bottleneck(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = planes
            self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or inplanes != planes * 4:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * 4),
                )

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            return self.relu(self.bn3(self.conv3(out)) + identity)

    return Bottleneck()


class ResNet50(nn.Module):
    """torchvision's ResNet-50: its parameters in its order (downsample after conv3/bn3,
    as torchvision registers it)."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        inplanes, stages = 64, []
        for planes, blocks, stride in (
            (64, 3, 1),
            (128, 4, 2),
            (256, 6, 2),
            (512, 3, 2),
        ):
            layers = []
            for i in range(blocks):
                layers.append(_bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * 4
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class EncoderBlock(nn.Module):
    """worker/models/encoder_block.cc: pre-norm attention and MLP, GELU."""

    def __init__(self, dim: int = 512, heads: int = 8, mlp: int = 2048) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(self.ln_1(x)).view(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.out_proj(attended.transpose(1, 2).reshape(b, n, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln_2(x))))


class Transformer(nn.Module):
    """worker/models/transformer.cc: embedding + learned positions, 6 blocks, mean-pooled
    head. `pos_embedding` is the model's own parameter (first in model order)."""

    def __init__(self, tokens: int = 128, classes: int = 2) -> None:
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, 512) * 0.02)
        self.embedding = nn.Embedding(30522, 512)
        self.layers = nn.Sequential(*[EncoderBlock() for _ in range(6)])
        self.ln = nn.LayerNorm(512)
        self.head = nn.Linear(512, classes)

    def forward(self, x):
        x = self.layers(self.embedding(x) + self.pos_embedding)
        return self.head(self.ln(x).mean(1))


MODELS = {
    "resnet50": (ResNet50, lambda batch, size: torch.randn(batch, 3, size, size), 1000),
    "transformer": (
        Transformer,
        lambda batch, size: torch.randint(0, 30522, (batch, 128)),
        2,
    ),
}


def _layers(model: nn.Module) -> list[tuple[str, nn.Module | None, list]]:
    """(name, module, parameters) per layer in model order: each module owning parameters
    directly; the model's own parameters (the transformer's positions) join its first."""
    layers = [
        (name, module, list(module.parameters(recurse=False)))
        for name, module in model.named_modules()
        if module is not model and any(True for _ in module.parameters(recurse=False))
    ]
    own = list(model.parameters(recurse=False))
    if own:
        name, module, params = layers[0]
        layers[0] = (name, module, own + params)
    order = {id(p): i for i, p in enumerate(model.parameters())}
    listed = [id(p) for _, _, params in layers for p in params]
    if sorted(listed, key=order.get) != listed:
        raise SystemExit("the layers' parameters are not in model order")
    return layers


def measure(name: str, batch: int, size: int, steps: int, warmup: int) -> dict:
    torch.manual_seed(0)
    build, make_input, classes = MODELS[name]
    model = build()
    layers = _layers(model)
    x = make_input(batch, size)
    target = torch.randint(0, classes, (batch,))
    forward_end: dict[int, float] = {}
    ready: dict[int, float] = {}
    for index, (_, module, params) in enumerate(layers):
        module.register_forward_hook(
            lambda *_, index=index: forward_end.__setitem__(index, time.perf_counter())
        )
        for p in params:
            p.register_post_accumulate_grad_hook(
                lambda _p, index=index: ready.__setitem__(
                    index, max(ready.get(index, 0.0), time.perf_counter())
                )
            )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    forward_s, backward_s, optimizer_s = [], [], []
    for step in range(warmup + steps):
        forward_end.clear()
        ready.clear()
        begin = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), target)
        forward_done = time.perf_counter()
        loss.backward()
        backward_done = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        optimizer_done = time.perf_counter()
        if step < warmup:
            continue
        # Model order is not always the order of execution (ResNet's downsample is registered
        # after conv3 but runs first): each mark is the running maximum, so a layer that ran
        # earlier than its place in the table gets no time of its own and the sum stays exact.
        ends = list(
            itertools.accumulate((forward_end[i] for i in range(len(layers))), max)
        )
        ends[-1] = forward_done  # the loss joins the last layer
        forward_s.append([e - s for s, e in zip([begin, *ends[:-1]], ends)])
        # Backward runs the layers last to first; each one's time ends when its gradients
        # are complete; what follows the first layer's gradients joins the first layer.
        marks = list(
            itertools.accumulate(
                [forward_done] + [ready[i] for i in reversed(range(len(layers)))], max
            )
        )
        marks[-1] = backward_done
        durations = [e - s for s, e in itertools.pairwise(marks)]
        backward_s.append(list(reversed(durations)))
        optimizer_s.append(optimizer_done - backward_done)

    def median(rows: list, i: int) -> float:
        return statistics.median(row[i] for row in rows)

    return {
        "model": name,
        "layers": [
            {
                "name": layer_name,
                "forward_s": median(forward_s, i),
                "backward_s": median(backward_s, i),
                "parameters": [p.numel() for p in params],
            }
            for i, (layer_name, _, params) in enumerate(layers)
        ],
        "optimizer_s": statistics.median(optimizer_s),
    }


def rescale(
    table: dict, time_scale: float, parameter_scale: float, jitter: float | None
) -> dict:
    """`table` with every time x `time_scale` and every parameter's element count x
    `parameter_scale` (rounded, at least 1): the same layers, ready order and bucket pattern
    at another device speed and gradient size. `jitter` replaces the table's when given."""
    out = dict(table)
    out["layers"] = [
        {
            **layer,
            "forward_s": layer["forward_s"] * time_scale,
            "backward_s": layer["backward_s"] * time_scale,
            "parameters": [
                max(1, round(p * parameter_scale)) for p in layer["parameters"]
            ],
        }
        for layer in table["layers"]
    ]
    out["data_s"] = table.get("data_s", 0.0) * time_scale
    out["optimizer_s"] = table.get("optimizer_s", 0.0) * time_scale
    if jitter is not None:
        out["jitter"] = jitter
    out["source"] = (
        f"{table.get('source', '?')}; rescaled: times x {time_scale:g}, "
        f"parameters x {parameter_scale:g}"
    )
    return out


def _summary(path: str, table: dict) -> str:
    total = sum(p for layer in table["layers"] for p in layer["parameters"])
    forward = sum(layer["forward_s"] for layer in table["layers"])
    backward = sum(layer["backward_s"] for layer in table["layers"])
    return (
        f"wrote {path}: {len(table['layers'])} layers, {total:,} parameters, forward "
        f"{forward * 1e3:.1f} ms, backward {backward * 1e3:.1f} ms, optimizer "
        f"{table['optimizer_s'] * 1e3:.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", choices=sorted(MODELS))
    parser.add_argument("-o", "--output", required=True)
    parser.add_argument(
        "--rescale",
        metavar="TABLE.json",
        help="rescale this table instead of measuring",
    )
    parser.add_argument(
        "--parameter-scale", type=float, default=1.0, help="with --rescale"
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=64, help="resnet50 only")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument(
        "--jitter", type=float, default=None, help="default 0 (kept by --rescale)"
    )
    args = parser.parse_args(argv)
    if args.rescale:
        with open(args.rescale, encoding="utf-8") as f:
            table = rescale(
                json.load(f), args.time_scale, args.parameter_scale, args.jitter
            )
        with open(args.output, "w", encoding="utf-8") as out:
            json.dump(table, out, indent=1)
            out.write("\n")
        print(_summary(args.output, table), file=sys.stderr)
        return 0
    if not args.model:
        parser.error("name a model to measure, or --rescale TABLE.json")
    torch.set_num_threads(args.threads)
    table = measure(args.model, args.batch, args.image_size, args.steps, args.warmup)
    scale = args.time_scale
    for layer in table["layers"]:
        layer["forward_s"] *= scale
        layer["backward_s"] *= scale
    table["optimizer_s"] *= scale
    shape = f"{args.image_size} px" if args.model == "resnet50" else "128 tokens"
    table = {
        "model": args.model,
        "source": (
            f"docs/examples/replay/make_table.py: torch {torch.__version__} on the CPU, "
            f"{args.threads} thread(s), batch {args.batch}, {shape}, median of {args.steps} "
            f"steps after {args.warmup}, times x {scale:g}; load average "
            f"{os.getloadavg()[0]:.1f} at the end"
        ),
        "element_bytes": 4,
        "data_s": 0.0,
        "optimizer_s": table["optimizer_s"],
        "jitter": args.jitter or 0.0,
        "layers": table["layers"],
    }
    with open(args.output, "w", encoding="utf-8") as out:
        json.dump(table, out, indent=1)
        out.write("\n")
    print(_summary(args.output, table), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
