"""A plain PyTorch DDP training script, benchmarked as a scalebench program cell.

Runs alone (`python train_ddp.py --steps 20`, one process) or under torchrun or scalebench,
which set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; scalebench also opens the report channel
that scalebench_client writes to (docs/programs.md). The model is a small MLP; `--width`
changes its size, so that two branches of a repository can differ in their code.
"""

import argparse
import os
import time

import scalebench_client as sb
import torch
import torch.distributed as dist
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument(
        "--fail-at", type=int, default=-1, help="raise at this step (tests)"
    )
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, args.width),
        torch.nn.ReLU(),
        torch.nn.Linear(args.width, 10),
    )
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(args.batch_size, 64)
    targets = torch.randint(0, 10, (args.batch_size,))

    began = time.monotonic()
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            began = time.monotonic()  # the outside clock of the measured steps
        if step == args.fail_at:
            raise RuntimeError(f"failing at step {step} as asked")
        with sb.step():
            with sb.phase("data"):
                x, y = inputs.clone(), targets.clone()
            with sb.phase("forward"):
                loss = F.cross_entropy(model(x), y)
            with sb.phase("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with sb.phase("optimizer"):
                optimizer.step()
    measured_s = time.monotonic() - began
    sb.metric("loss", float(loss))
    sb.metric("outside_measured_s", measured_s)
    sb.memory()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
