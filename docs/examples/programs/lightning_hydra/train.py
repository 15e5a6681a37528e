"""A Lightning + Hydra training script shaped like CytoDL's ``cyto_dl/train.py``: Hydra
composes ``configs/train.yaml`` with an experiment and a trainer config and the command
line's overrides, and ``Trainer.fit`` trains a small image classifier on synthetic data.

Nothing in it knows about scalebench: run by scalebench (docs/programs.md#lightning), the
client's Lightning adapter reports its steps through the ``callbacks_factory`` entry point,
and with ``validate: true`` hands the trained model's outputs on a fixed batch for the
accuracy check across branches (Note [Lightning outputs]).
Run alone: ``python train.py experiment=cnn trainer.max_steps=20``.

The demo repository's branch ``bf16-channels-last`` (run_demo.sh) sets ``model.channels_last``
and ``trainer.precision`` in configs/experiment/cnn.yaml; the code is the same.
"""

from __future__ import annotations

import time

import hydra
import lightning as L
import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch.utils.data import DataLoader, TensorDataset


class ImageClassifier(L.LightningModule):
    def __init__(
        self, channels: int, classes: int, width: int, lr: float, channels_last: bool
    ):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(channels, width, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(width, 2 * width, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(4),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * width * 16, classes),
        )
        if channels_last:
            self.net = self.net.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.hparams.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class SyntheticImages(L.LightningDataModule):
    def __init__(
        self, samples: int, channels: int, size: int, classes: int, batch_size: int
    ):
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        h = self.hparams
        images = torch.randn(h.samples, h.channels, h.size, h.size, generator=g)
        labels = torch.randint(0, h.classes, (h.samples,), generator=g)
        self.train = TensorDataset(images, labels)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.hparams.batch_size, shuffle=True)


@hydra.main(version_base=None, config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    began = time.monotonic()
    L.seed_everything(cfg.seed, workers=True)
    data = SyntheticImages(**cfg.data)
    model = ImageClassifier(**cfg.model)
    trainer = L.Trainer(**cfg.trainer)
    trainer.fit(model, datamodule=data)
    if trainer.global_rank == 0:
        print(
            f"trained {trainer.global_step} steps in {time.monotonic() - began:.2f} s "
            f"(model.width={cfg.model.width}, precision={cfg.trainer.precision}, "
            f"world size {trainer.world_size})"
        )


if __name__ == "__main__":
    main()
