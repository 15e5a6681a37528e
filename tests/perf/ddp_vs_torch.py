"""scalebench's DDP training step against PyTorch DistributedDataParallel (gloo on CPU, NCCL
on GPUs).

Same TorchScript module (an MLP 784-512-512-10, perf_common.Mlp, torch.jit.script), same
HDF5 rows in the same order, same loss (mean cross entropy in float32), same optimizer
(SGD, fixed lr, no momentum), 2 ranks with 1 intra-op thread each.

* scalebench: `mpirun -np 3 scalebench run` (world_size 2, backend mpi); its figure is the
  summary's `median_s`: median over measured iterations of the slowest rank's `step`,
  which spans reading the batch's rows from the HDF5 file (`data`), forward + loss,
  backward with the bucketed gradient allreduce, `comm_wait`, optimizer step + zero_grad.
* PyTorch: torch.multiprocessing spawns 2 processes, gloo, torch.set_num_threads(1) and
  set_num_interop_threads(1), DDP around torch.jit.load of the same file. Each iteration
  is timed with time.perf_counter around: indexing the batch's rows out of tensors already
  in memory (the dataset read once before the loop), forward + loss, backward (DDP's
  allreduce), optimizer step + zero_grad. The figure is the same statistic: median over
  measured iterations of the slowest rank's time. Warm-up iterations run first, then a
  barrier (as scalebench's MPI_Barrier before its measured loop).

Ratio torch / scalebench: >= 1.00 means scalebench's step is at least as fast.
Equality: scalebench's param_checksum formula applied to PyTorch's final parameters
against the param_checksum in the results file.

With --device cuda (tests/gpu/verify.sh), rank r runs on cuda:r: scalebench with backend nccl
(its step timed by CUDA events), PyTorch with NCCL, DDP with device_ids=[r], the dataset in the
GPU's memory, and torch.cuda.synchronize() before each iteration's end time is taken. At
--world 1 there is no process group and no DDP wrapper: one GPU against PyTorch eager.

Usage: ddp_vs_torch.py BUILD_DIR [--iterations N] [--warmup W] [--batch B]
                       [--device cpu|cuda] [--world N]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from perf_common import (
    CLASSES,
    INPUTS,
    export_model,
    fmt_ms,
    param_checksum,
    read_cells,
    run_scalebench,
    table_line,
    train_rows,
    write_dataset,
)

LR = 0.01
SEED = 0


def torch_rank(rank, port, model_path, inputs, targets, args, results):
    """One DDP rank (at world 1 on a GPU: the eager module alone): the same steps as
    scalebench's cell; puts (rank, step times, final param_checksum, final loss) on
    `results`."""
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    cuda = args.device == "cuda"
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    distributed = not cuda or args.world > 1
    if distributed:
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=args.world)
    module = torch.jit.load(model_path, map_location=device)
    module.train()
    model = module
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            module, device_ids=[rank] if cuda else None
        )
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.0)
    inputs = torch.from_numpy(inputs).to(device)
    targets = torch.from_numpy(targets).to(device)
    rows = inputs.shape[0]
    times = []
    for iteration in range(args.warmup + args.iterations):
        if iteration == args.warmup:
            if distributed:
                dist.barrier()
            if cuda:
                torch.cuda.synchronize()
        start = time.perf_counter()
        index = torch.from_numpy(train_rows(iteration, rank, args.world, args.batch, rows))
        index = index.to(device)
        x, y = inputs[index], targets[index]
        loss = F.cross_entropy(model(x).float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    results.put((rank, times, param_checksum(module.parameters()), loss.item()))
    if distributed:
        dist.destroy_process_group()


def run_torch(model_path, inputs, targets, args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(
            target=torch_rank, args=(r, port, model_path, inputs, targets, args, results)
        )
        for r in range(args.world)
    ]
    for p in processes:
        p.start()
    out = sorted(results.get(timeout=600) for _ in range(args.world))
    for p in processes:
        p.join()
    times = np.array([o[1] for o in out])[:, args.warmup :]
    return np.median(times.max(axis=0)), [o[2] for o in out], [o[3] for o in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--world", type=int, default=2, help="ranks (GPUs with --device cuda)")
    args = parser.parse_args()
    if args.device == "cuda" and torch.cuda.device_count() < args.world:
        parser.error(f"--world {args.world} needs as many GPUs; {torch.cuda.device_count()} found")
    work = Path(tempfile.mkdtemp(prefix="scalebench-perf-ddp-"))
    model_path = work / "model.pt"
    export_model(model_path, seed=SEED)
    inputs, targets = write_dataset(work / "data.h5", args.rows)
    matrix = {
        "name": "perf-ddp",
        "defaults": {
            "device": args.device,
            "backend": "nccl" if args.device == "cuda" else "mpi",
            "cpu_threads": 1,
            "warmup": args.warmup,
            "iterations": args.iterations,
            "seed": SEED,
            "timeout_s": 600,
            "optimizer": {"name": "sgd", "lr": LR, "momentum": 0.0},
        },
        "sweep": {"modes": ["train"], "batch_sizes": [args.batch], "world_sizes": [args.world]},
        "experiments": [
            {
                "name": "mlp-ts",
                "model": {"torchscript": str(model_path)},
                "input_shape": [INPUTS],
                "num_classes": CLASSES,
                "data": {"hdf5": str(work / "data.h5"), "inputs": "inputs", "targets": "targets"},
            }
        ],
    }
    results, _ = run_scalebench(args.build, matrix, work, "ddp", workers=args.world)
    (cell,) = read_cells(results)
    ours = float(cell["summary"]["median_s"])
    theirs, checksums, losses = run_torch(str(model_path), inputs, targets, args)
    ours_checksum = float(cell["metrics"]["param_checksum"][0])
    rel = abs(checksums[0] - ours_checksum) / abs(ours_checksum)
    ratio = theirs / ours

    where = f"{args.world} GPU(s), NCCL" if args.device == "cuda" else f"{args.world} ranks"
    theirs_name = "PyTorch eager" if args.device == "cuda" and args.world == 1 else "PyTorch DDP"
    print(f"ddp_vs_torch: MLP 784-512-512-10, batch {args.batch} per rank, {where},")
    print(f"  1 thread each, warmup {args.warmup}, {args.iterations} measured iterations")
    print(f"  scalebench median step (slowest rank): {fmt_ms(ours)}")
    for phase in cell["phases"]:
        median = float(cell["summary"][f"phase_median_s_{phase}"])
        print(f"    phase {phase:<10} median {fmt_ms(median)}")
    print(f"    cpu_threads_per_core {cell['summary']['cpu_threads_per_core']:.2f}")
    print(f"  {theirs_name} median step (slowest rank): {fmt_ms(theirs)}")
    print(f"  ratio torch / scalebench: {ratio:.2f}x")
    print(
        f"  param_checksum scalebench {ours_checksum!r} (both ranks: "
        f"{cell['metrics']['param_checksum'].tolist()})"
    )
    print(f"  param_checksum PyTorch    {checksums[0]!r} (both ranks: {checksums})")
    print(
        f"  relative difference {rel:.3g}; final loss scalebench "
        f"{cell['summary']['final_loss_mean']:.9g}, PyTorch {np.mean(losses):.9g}"
    )
    if rel != 0:
        print("  not bit-identical: see docs/performance.md (Benchmarks) for why")
    figure = "DDP step, torch/scalebench"
    if args.device == "cuda":
        step = "eager" if args.world == 1 else "DDP"
        figure = f"{step} step on {args.world} GPU(s), torch/scalebench"
    table_line("ddp_vs_torch", figure, ">= 1.00x", f"{ratio:.2f}x", ratio >= 1.0)
    table_line(
        "ddp_vs_torch", "param_checksum rel. difference", "0 (bit-equal)", f"{rel:.2g}", rel == 0
    )


if __name__ == "__main__":
    main()
