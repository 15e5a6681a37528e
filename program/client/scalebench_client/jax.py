"""JAX adapter (docs/programs.md#jax): compilation timed apart from execution, steps that end
when their results exist, device memory, and multi-process JAX from scalebench's launch.

JAX has no training loop of its own to hook, so a JAX program marks its steps itself:

    import scalebench_client as sb
    import scalebench_client.jax as sbj

    sbj.initialize()                                  # multi-process JAX from RANK/WORLD_SIZE
    step = sbj.compile(train_step, state, batch)      # lower + compile, timed: compile_s
    for i in range(warmup + steps):
        with sb.step():
            with sb.phase("data"):
                batch = next(batches)
            with sb.phase("compute"):
                state, loss = sbj.block(step(state, batch))
    sbj.memory()

Dispatch is asynchronous: without ``block`` a step would end when its work is queued, not
done. ``block`` waits for every array of its argument (``jax.block_until_ready``), which is
what the step's time must include; it is the only synchronisation the adapter makes.
"""

from __future__ import annotations

import os
import time

import scalebench_client as sb

# docs/profiles.md#program-cells: the operator profiles of program cells are torch.profiler's.
sb.profile_unsupported(
    "the JAX adapter takes no operator profiles (they use torch.profiler); profile a JAX "
    "program with jax.profiler"
)


def initialize() -> bool:
    """Initialises multi-process JAX from scalebench's launch (the torchrun variables) when
    the cell has more than one rank: coordinator MASTER_ADDR:MASTER_PORT, WORLD_SIZE
    processes, this one RANK. Explicit arguments, so JAX's own cluster detection (which
    would read an MPI launcher's variables; scalebench removes them) plays no part. On CPU,
    cross-process collectives go over gloo. Returns True when it initialised."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return False
    import jax

    if os.environ.get("SCALEBENCH_DEVICE", "cpu") == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        num_processes=world,
        process_id=int(os.environ["RANK"]),
    )
    return True


def compile(fn, *args, name: str = "compile", **kwargs):
    """``jax.jit(fn)`` lowered and compiled for these arguments now, the time reported as the
    metric ``<name>_s`` (default ``compile_s``), so that the first step measures execution
    only. Returns the compiled function (call it with arguments of the same shapes)."""
    import jax

    began = time.monotonic()
    compiled = jax.jit(fn).lower(*args, **kwargs).compile()
    sb.metric(f"{name}_s", time.monotonic() - began)
    return compiled


def block(value):
    """Waits until every array in ``value`` is computed and returns it."""
    import jax

    return jax.block_until_ready(value)


def memory() -> None:
    """Reports the peak device memory of JAX's allocator (``device.memory_stats()``, on GPUs)
    as the ``cuda`` kind, else the process's resident set (``sb.memory``)."""
    import jax

    stats = None
    try:
        stats = jax.local_devices()[0].memory_stats()
    except (RuntimeError, NotImplementedError, IndexError):
        stats = None
    if not stats or "peak_bytes_in_use" not in stats:
        sb.memory()
        return
    sb.report_memory(
        "cuda", int(stats["peak_bytes_in_use"]), int(stats.get("bytes_in_use", 0))
    )
