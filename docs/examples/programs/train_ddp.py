"""A plain PyTorch DDP training script, benchmarked as a scalebench program cell.

Runs alone (`python train_ddp.py --steps 20`, one process) or under torchrun or scalebench,
which set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; scalebench also opens the report channel
that scalebench_client writes to (docs/programs.md). The model is a small MLP; `--width`
changes its size. run_demo.sh makes a repository of it whose branches differ in how the
data phase prepares a batch (PER_SAMPLE_TRANSFORM), in precision (AUTOCAST_BF16) and, as a
deliberate bug, in their outputs (OUTPUT_SHIFT), and benchmarks them. After training, the
script hands the outputs of fixed validation inputs to scalebench (`sb.outputs`), which
compares them with the baseline branch's (docs/accuracy.md#across-cells).
"""

import argparse
import os
import time

import scalebench_client as sb
import torch
import torch.distributed as dist
import torch.nn.functional as F

# How the data phase normalises a batch: sample by sample in a Python loop, as a per-sample
# Dataset transform does (True), or as one vectorised operation on the whole batch (False).
# The demo repository's branch `main` has True, its branch `batched-transform` False.
PER_SAMPLE_TRANSFORM = False
# The demo's branch `bf16-autocast`: forward passes under CPU bf16 autocast (an optimisation
# whose outputs must stay within tolerance of main's).
AUTOCAST_BF16 = False
# The demo's branch `shifted-outputs`: a deliberate bug that only the accuracy check sees.
OUTPUT_SHIFT = 0.0


def normalise(batch: torch.Tensor) -> torch.Tensor:
    """Each sample to zero mean and unit variance."""
    if PER_SAMPLE_TRANSFORM:
        return torch.stack([(s - s.mean()) / (s.std() + 1e-6) for s in batch])
    mean = batch.mean(dim=1, keepdim=True)
    return (batch - mean) / (batch.std(dim=1, keepdim=True) + 1e-6)


def autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=AUTOCAST_BF16)


def hand_validation_outputs(model: torch.nn.Module, world: int) -> None:
    """The trained model's outputs on fixed validation inputs (each rank its own shard, the
    same on every branch), for scalebench's accuracy check across branches: a no-op unless
    the cell has `validate: true`."""
    if not sb.wants_outputs():
        return
    rank = dist.get_rank() if world > 1 else 0
    inputs = torch.randn(64, 64, generator=torch.Generator().manual_seed(1000 + rank))
    with torch.no_grad(), autocast():
        sb.outputs(model(normalise(inputs)).float() + OUTPUT_SHIFT)


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
    measured_s = 0.0
    # Under scalebench with `profile_steps: N` the client profiles N more steps after the
    # measured ones (docs/profiles.md#program-cells): a program that counts its steps from
    # {warmup} and {iterations} adds them; 0 otherwise.
    profiled = sb.profile_steps()
    for step in range(args.warmup + args.steps + profiled):
        if step == args.warmup:
            began = time.monotonic()  # the outside clock of the measured steps
        if step == args.warmup + args.steps:
            measured_s = time.monotonic() - began
        if step == args.fail_at:
            raise RuntimeError(f"failing at step {step} as asked")
        with sb.step():
            with sb.phase("data"):
                x, y = normalise(inputs), targets.clone()
            with sb.phase("forward"), autocast():
                loss = F.cross_entropy(model(x), y)
            with sb.phase("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with sb.phase("optimizer"):
                optimizer.step()
    if not profiled:
        measured_s = time.monotonic() - began
    hand_validation_outputs(model, world)
    sb.metric("loss", loss.item())
    sb.metric("outside_measured_s", measured_s)
    sb.memory()
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
