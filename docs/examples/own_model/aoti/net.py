"""The model of the AOTInductor example (docs/own-model.md#aotinductor-packages): a small
convolutional classifier, built by `build` as `python -m scalebench_client.export
--factory net:build` calls it."""

import torch


def build(channels: int = 8, classes: int = 10) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(channels * 16, classes),
    )
