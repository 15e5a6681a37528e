"""Export this branch's model for scalebench.

scalebench runs this as the matrix's `prepare:` step, once per branch, inside the branch's
git worktree (see docs/own-model.md):

    prepare: [python, export_model.py, --out, build]

It writes, under --out:
  model.pt       the model as TorchScript (torch.jit.script + torch.jit.save); scalebench
                 trains it and runs inference with it, in C++, on every worker rank
  weights.pt     a checkpoint, torch.save(dict(model.state_dict())): the weights the
                 inference cells load (a stand-in for trained weights here)
  data.h5        an HDF5 dataset: `inputs` [rows, 16] float32, `targets` [rows] int64
  expected.json  reference figures to check a run against: the parameter count and the
                 inference output checksum scalebench must report for data.h5 + weights.pt

Each optimisation branch changes the model (here: HIDDEN); scalebench benchmarks each
branch's own export.
"""
import argparse
import json
import pathlib

import h5py
import numpy as np
import torch

HIDDEN = [32]  # this branch's architecture: the widths of the hidden layers
INPUTS = 16
CLASSES = 3


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers, width = [], INPUTS
        for hidden in HIDDEN:
            layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
            width = hidden
        layers.append(torch.nn.Linear(width, CLASSES))
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def output_checksum(logits: torch.Tensor) -> float:
    """scalebench's inference output_checksum over rows 0..n-1 (docs/metrics.md):
    sum over rows i of (1 + (i mod 97) / 97) * sum |logits_i|, in float64."""
    weights = 1 + (torch.arange(logits.shape[0]) % 97).double() / 97
    return float((logits.double().abs().sum(1) * weights).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build", help="output folder (inside the worktree)")
    parser.add_argument("--rows", type=int, default=64, help="rows of data.h5")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = Net().eval()
    torch.jit.save(torch.jit.script(model), str(out / "model.pt"))

    torch.manual_seed(1)
    trained = Net().eval()
    torch.save(dict(trained.state_dict()), out / "weights.pt")

    rng = np.random.default_rng(0)
    inputs = rng.standard_normal((args.rows, INPUTS)).astype(np.float32)
    targets = rng.integers(0, CLASSES, size=args.rows, dtype=np.int64)
    with h5py.File(out / "data.h5", "w") as f:
        f.create_dataset("inputs", data=inputs)
        f.create_dataset("targets", data=targets)

    with torch.no_grad():
        logits = trained(torch.from_numpy(inputs))
    expected = {
        "parameter_count": sum(p.numel() for p in model.parameters()),
        "output_checksum": output_checksum(logits),
        "rows": args.rows,
    }
    (out / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    print(f"exported {HIDDEN} -> {out}: {expected}")


if __name__ == "__main__":
    main()
