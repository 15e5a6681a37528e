"""Python twins of scalebench's built-in zoo models (worker/models/*.cc), for the compile axis.

``compile: [eager, torchscript, aoti]`` (docs/optimizations.md#compilation) runs one zoo model
three ways over the same weights. The C++ workers run ``eager``; rank 0 writes the eager
model's state (its seed's weights, its checkpoint) and ``python -m scalebench_client.export
--zoo NAME --state FILE`` builds the twin here, loads that state *strictly* and exports it
with torch.jit.trace or torch.export + AOTInductor.

A twin must compute what its C++ model computes: the same module and parameter names
(strict loading checks those), the same layer options (padding, bias, eps) and the same
forward, op for op. A change to a model in worker/models/ changes its twin here; the
compile axis' accuracy validation (each twin against the eager model in fp32) and
tests/analysis/test_compile_axis.py catch a twin that drifted.

``build(name, input_shape, num_classes)`` returns the twin; ``example_input(name, ...)`` a
batch it accepts (token ids for ``transformer``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: worker/models/zoo_model.h kTransformerVocab (BERT's vocabulary).
TRANSFORMER_VOCAB = 30522
#: The zoo models with a twin: every one of worker/model_zoo.h.
NAMES = ("mlp", "resnet18", "resnet50", "vit_b16", "unet3d", "transformer")


class Mlp(nn.Module):
    """worker/models/mlp.cc: flatten -> 512 -> ReLU -> 512 -> ReLU -> classes."""

    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, num_classes)

    def forward(self, x):
        x = x.flatten(1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def _conv(inp: int, out: int, kernel: int, stride: int) -> nn.Conv2d:
    return nn.Conv2d(inp, out, kernel, stride=stride, padding=kernel // 2, bias=False)


class _Block(nn.Module):
    """worker/models/resnet.cc BlockImpl: BasicBlock or Bottleneck, torchvision's names."""

    def __init__(self, bottleneck: bool, inp: int, planes: int, stride: int):
        super().__init__()
        out = planes * 4 if bottleneck else planes
        if bottleneck:
            specs = [
                (inp, planes, 1, 1),
                (planes, planes, 3, stride),
                (planes, out, 1, 1),
            ]
        else:
            specs = [(inp, planes, 3, stride), (planes, out, 3, 1)]
        self.count = len(specs)
        for index, (a, b, kernel, s) in enumerate(specs, start=1):
            setattr(self, f"conv{index}", _conv(a, b, kernel, s))
            setattr(self, f"bn{index}", nn.BatchNorm2d(b))
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(
                _conv(inp, out, 1, stride), nn.BatchNorm2d(out)
            )

    def forward(self, inputs):
        x = inputs
        for index in range(1, self.count + 1):
            x = getattr(self, f"bn{index}")(getattr(self, f"conv{index}")(x))
            if index < self.count:
                x = torch.relu(x)
        identity = self.downsample(inputs) if self.downsample is not None else inputs
        return torch.relu(x + identity)


class ResNet(nn.Module):
    """worker/models/resnet.cc: torchvision ResNet-18 / ResNet-50 (v1.5)."""

    def __init__(self, depth: int, in_channels: int, num_classes: int):
        super().__init__()
        bottleneck, blocks = {18: (False, (2, 2, 2, 2)), 50: (True, (3, 4, 6, 3))}[
            depth
        ]
        self.conv1 = _conv(in_channels, 64, 7, 2)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for stage in range(4):
            planes = 64 << stage
            layer = []
            for b in range(blocks[stage]):
                stride = 2 if b == 0 and stage > 0 else 1
                layer.append(_Block(bottleneck, inp, planes, stride))
                inp = planes * 4 if bottleneck else planes
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layer))
        self.fc = nn.Linear(inp, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 3, 2, 1)
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return self.fc(x)


class EncoderBlock(nn.Module):
    """worker/models/encoder_block.cc: pre-norm attention + GELU MLP."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, eps: float):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim, eps=eps)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim, eps=eps)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.fc2 = nn.Linear(mlp_dim, dim)

    def forward(self, inputs):
        batch, tokens, dim = inputs.shape
        qkv = (
            self.qkv(self.ln_1(inputs))
            .reshape(batch, tokens, 3, self.heads, dim // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        attended = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        attended = attended.transpose(1, 2).reshape(batch, tokens, dim)
        x = inputs + self.out_proj(attended)
        return x + self.fc2(F.gelu(self.fc1(self.ln_2(x))))


class VisionTransformer(nn.Module):
    """worker/models/vit.cc: ViT-B/16, torchvision's parameter layout."""

    def __init__(self, channels: int, tokens: int, num_classes: int):
        super().__init__()
        self.conv_proj = nn.Conv2d(channels, 768, 16, stride=16)
        self.class_token = nn.Parameter(torch.zeros(1, 1, 768))
        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, 768) * 0.02)
        self.layers = nn.Sequential(
            *[EncoderBlock(768, 12, 3072, 1e-6) for _ in range(12)]
        )
        self.ln = nn.LayerNorm(768, eps=1e-6)
        self.head = nn.Linear(768, num_classes)

    def forward(self, x):
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        token = self.class_token.expand(x.shape[0], 1, 768).to(x.dtype)
        x = torch.cat([token, x], 1)
        x = self.layers(x + self.pos_embedding)
        return self.head(self.ln(x).select(1, 0))


class TransformerClassifier(nn.Module):
    """worker/models/transformer.cc: token + position embedding, 6 pre-norm layers."""

    def __init__(self, tokens: int, num_classes: int):
        super().__init__()
        self.embedding = nn.Embedding(TRANSFORMER_VOCAB, 512)
        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, 512) * 0.02)
        self.layers = nn.Sequential(
            *[EncoderBlock(512, 8, 2048, 1e-5) for _ in range(6)]
        )
        self.ln = nn.LayerNorm(512)
        self.head = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.layers(self.embedding(x) + self.pos_embedding)
        return self.head(self.ln(x).mean(1))


def _double_conv(inp: int, out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv3d(inp, out, 3, padding=1, bias=False),
        nn.BatchNorm3d(out),
        nn.ReLU(),
        nn.Conv3d(out, out, 3, padding=1, bias=False),
        nn.BatchNorm3d(out),
        nn.ReLU(),
    )


class UNet3d(nn.Module):
    """worker/models/unet3d.cc: 3 levels of 16, 32, 64 channels, 128 at the bottleneck."""

    levels = 3

    def __init__(self, in_channels: int, num_classes: int):
        super().__init__()
        channels = in_channels
        for level in range(self.levels):
            width = 16 << level
            setattr(self, f"down{level}", _double_conv(channels, width))
            channels = width
        self.bottleneck = _double_conv(channels, 16 << self.levels)
        for level in reversed(range(self.levels)):
            width = 16 << level
            setattr(
                self,
                f"upsample{level}",
                nn.ConvTranspose3d(width * 2, width, 2, stride=2),
            )
            setattr(self, f"up{level}", _double_conv(width * 2, width))
        self.head = nn.Conv3d(16, num_classes, 1)

    def forward(self, x):
        skips = []
        for level in range(self.levels):
            skip = getattr(self, f"down{level}")(x)
            skips.append(skip)
            x = F.max_pool3d(skip, 2)
        x = self.bottleneck(x)
        for level in reversed(range(self.levels)):
            x = getattr(self, f"upsample{level}")(x)
            x = getattr(self, f"up{level}")(torch.cat([skips[level], x], 1))
        return self.head(x)


def build(name: str, input_shape: list[int], num_classes: int) -> nn.Module:
    """The twin of zoo model ``name`` for one sample of ``input_shape`` (no batch dimension)."""
    if name == "mlp":
        features = 1
        for extent in input_shape:
            features *= extent
        return Mlp(features, num_classes)
    if name in ("resnet18", "resnet50"):
        return ResNet(int(name[len("resnet") :]), input_shape[0], num_classes)
    if name == "vit_b16":
        tokens = (input_shape[1] // 16) * (input_shape[2] // 16) + 1
        return VisionTransformer(input_shape[0], tokens, num_classes)
    if name == "unet3d":
        return UNet3d(input_shape[0], num_classes)
    if name == "transformer":
        return TransformerClassifier(input_shape[0], num_classes)
    raise ValueError(
        f"zoo model {name!r} has no Python twin; known: {', '.join(NAMES)}"
    )


def example_input(name: str, batch: int, input_shape: list[int], device: str):
    """A batch the twin accepts: N(0, 1) floats, or token ids for ``transformer``."""
    if name == "transformer":
        return torch.randint(0, TRANSFORMER_VOCAB, (batch, *input_shape), device=device)
    return torch.randn(batch, *input_shape, device=device)
