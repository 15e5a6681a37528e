"""scalebench (C++ workers running the TorchScript module) against a PyTorch eager loop of
the same nn.Module with the same weights, 1 intra-op thread, one process.

* Training, world 1, batch 32: scalebench's summary `median_s` (median measured `step`:
  HDF5 read of the batch's rows, forward + cross entropy, backward, SGD step + zero_grad)
  against the median of an eager loop timed with time.perf_counter around the same work,
  the rows indexed out of tensors already in memory. Ratio eager / scalebench (goal >= 1).
* Inference, batch 1: scalebench's summary `median_s` of an inference cell (median
  `batch`: HDF5 read of one row, forward under NoGradGuard) against the median of an
  eager loop (index one row in memory, forward under torch.no_grad()). Ratio scalebench /
  eager (goal <= 0.75: C++ should save Python's per-call overhead).

The TorchScript module is perf_common.Mlp scripted; the eager module is the same Python
object before scripting (same weights). Both loops see the same rows in the same order.

Usage: cpp_vs_eager.py BUILD_DIR [--train-iterations N] [--infer-iterations N]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from perf_common import (
    CLASSES,
    INPUTS,
    export_model,
    fmt_ms,
    fmt_us,
    param_checksum,
    read_cells,
    run_scalebench,
    table_line,
    train_rows,
    write_dataset,
)

LR = 0.01
WARMUP = 5


def eager_train(model, inputs, targets, batch, iterations):
    """Median step time of the eager loop; the final parameters' checksum."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)
    rows = inputs.shape[0]
    times = []
    for iteration in range(WARMUP + iterations):
        start = time.perf_counter()
        index = torch.from_numpy(train_rows(iteration, 0, 1, batch, rows))
        loss = F.cross_entropy(model(inputs[index]).float(), targets[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return float(np.median(times[WARMUP:])), param_checksum(model.parameters())


def eager_infer(model, inputs, iterations):
    """Median batch-1 latency (whole batch) and median of the forward call alone."""
    model.eval()
    rows = inputs.shape[0]
    whole, forward = [], []
    outputs = []
    with torch.no_grad():
        for i in range(WARMUP + iterations):
            start = time.perf_counter()
            row = i % rows
            x = inputs[row : row + 1]
            middle = time.perf_counter()
            outputs.append(model(x))
            end = time.perf_counter()
            whole.append(end - start)
            forward.append(end - middle)
    return float(np.median(whole[WARMUP:])), float(np.median(forward[WARMUP:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--train-iterations", type=int, default=500)
    parser.add_argument("--infer-iterations", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2048)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    work = Path(tempfile.mkdtemp(prefix="scalebench-perf-eager-"))
    model_path = work / "model.pt"
    eager = export_model(model_path)
    inputs, targets = write_dataset(work / "data.h5", args.rows)
    data = {"hdf5": str(work / "data.h5"), "inputs": "inputs", "targets": "targets"}
    experiment = {
        "model": {"torchscript": str(model_path)},
        "input_shape": [INPUTS],
        "num_classes": CLASSES,
        "data": data,
        "world_sizes": [1],
    }
    matrix = {
        "name": "perf-eager",
        "defaults": {
            "device": "cpu",
            "cpu_threads": 1,
            "warmup": WARMUP,
            "seed": 0,
            "timeout_s": 600,
            "optimizer": {"name": "sgd", "lr": LR, "momentum": 0.0},
        },
        "experiments": [
            {
                **experiment,
                "name": "train",
                "mode": "train",
                "batch_sizes": [args.batch],
                "iterations": args.train_iterations,
            },
            {
                **experiment,
                "name": "infer",
                "mode": "infer",
                "batch_sizes": [1],
                "iterations": args.infer_iterations,
            },
        ],
    }
    results, _ = run_scalebench(args.build, matrix, work, "eager", workers=1)
    cells = {c["mode"]: c for c in read_cells(results)}
    inputs, targets = torch.from_numpy(inputs), torch.from_numpy(targets)
    eager_step, eager_checksum = eager_train(
        copy.deepcopy(eager), inputs, targets, args.batch, args.train_iterations
    )
    eager_batch, eager_forward = eager_infer(copy.deepcopy(eager), inputs, args.infer_iterations)

    train, infer = cells["train"], cells["infer"]
    ours_step = float(train["summary"]["median_s"])
    ours_batch = float(infer["summary"]["median_s"])
    ours_checksum = float(train["metrics"]["param_checksum"][0])
    train_ratio = eager_step / ours_step
    infer_ratio = ours_batch / eager_batch
    print(f"cpp_vs_eager: MLP 784-512-512-10, 1 thread, warmup {WARMUP}")
    print(f"  training, batch {args.batch}, {args.train_iterations} iterations:")
    print(f"    scalebench median step {fmt_ms(ours_step)}", end="")
    print(
        " ("
        + ", ".join(
            f"{p} {fmt_ms(float(train['summary'][f'phase_median_s_{p}']))}"
            for p in train["phases"][:-1]
        )
        + ")"
    )
    print(f"    eager median step      {fmt_ms(eager_step)}")
    print(f"    ratio eager / scalebench {train_ratio:.2f}x")
    rel = abs(eager_checksum - ours_checksum) / abs(ours_checksum)
    print(
        f"    param_checksum scalebench {ours_checksum!r}, eager {eager_checksum!r} "
        f"(relative difference {rel:.3g})"
    )
    print(f"  inference, batch 1, {args.infer_iterations} batches:")
    print(f"    scalebench median batch {fmt_us(ours_batch)}", end="")
    print(
        " ("
        + ", ".join(
            f"{p} {fmt_us(float(infer['summary'][f'phase_median_s_{p}']))}"
            for p in infer["phases"][:-1]
        )
        + ")"
    )
    print(
        f"    eager median batch      {fmt_us(eager_batch)} (forward call {fmt_us(eager_forward)})"
    )
    print(
        f"    ratio scalebench / eager {infer_ratio:.2f}x; forward only "
        f"{float(infer['summary']['phase_median_s_forward']) / eager_forward:.2f}x"
    )
    table_line(
        "cpp_vs_eager",
        "train step, eager/scalebench",
        ">= 1.00x",
        f"{train_ratio:.2f}x",
        train_ratio >= 1.0,
    )
    table_line(
        "cpp_vs_eager",
        "batch-1 latency, scalebench/eager",
        "<= 0.75x",
        f"{infer_ratio:.2f}x",
        infer_ratio <= 0.75,
    )


if __name__ == "__main__":
    main()
