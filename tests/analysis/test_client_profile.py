"""Operator profiles of program cells through the client (docs/profiles.md#program-cells):
the reduction of profiler events to the rows the worker stores (scalebench_client.profile_rows,
the rules of Note [Operator profiles]), the record's size bound, and a tiny torch model run as
a program cell runs it (the report channel a worker opens, the client from this tree): its
profiled steps under torch.profiler, each phase's operators in that phase."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "program" / "client"
sys.path.insert(0, str(CLIENT))

from scalebench_client import profile_rows, profiling  # noqa: E402
from scalebench_client.profile_rows import KERNEL, MEMORY, OP, PHASE, Event  # noqa: E402


def _rows(events):
    return {(r.device, r.phase, r.name): r for r in profile_rows.summarize(events)}


def test_self_time_is_what_nested_ops_on_the_same_thread_leave():
    rows = _rows(
        [
            Event(OP, "aten::linear", 1, 0, 100),
            Event(OP, "aten::addmm", 1, 10, 80),
            Event(OP, "aten::copy_", 1, 20, 30),
            Event(OP, "aten::other_thread", 2, 20, 60),  # another thread: not a child
        ]
    )
    assert rows["cpu", "", "aten::linear"].self_s == pytest.approx(30e-9)
    assert rows["cpu", "", "aten::linear"].total_s == pytest.approx(100e-9)
    assert rows["cpu", "", "aten::addmm"].self_s == pytest.approx(60e-9)
    assert rows["cpu", "", "aten::other_thread"].self_s == pytest.approx(40e-9)


def test_a_phase_nested_in_an_op_is_its_child_and_keeps_its_own_time():
    """Lightning's optimizer step runs the closure's phases inside its record: a sleep in
    forward (the phase's own Python code, 400 ns here) is not the optimizer step's self time."""
    rows = _rows(
        [
            Event(PHASE, "optimizer", 1, 0, 1000),
            Event(OP, "Optimizer.step#Adam.step", 1, 10, 990),
            Event(PHASE, "forward", 1, 20, 520),
            Event(OP, "aten::addmm", 1, 30, 130),
            Event(MEMORY, "[memory]", 1, 200, 200, nbytes=512),  # in forward, in no op
            Event(OP, "aten::add_", 1, 600, 700),  # the update itself
        ]
    )
    step = rows["cpu", "optimizer", "Optimizer.step#Adam.step"]
    assert step.self_s == pytest.approx((980 - 500 - 100) * 1e-9)
    assert step.total_s == pytest.approx(980e-9)
    assert step.self_cpu_memory_bytes == 0
    assert rows["cpu", "forward", "aten::addmm"].self_s == pytest.approx(100e-9)
    assert rows["cpu", "optimizer", "aten::add_"].self_s == pytest.approx(100e-9)


def test_an_event_belongs_to_the_innermost_phase_holding_its_start_on_any_thread():
    rows = _rows(
        [
            Event(PHASE, "step", 1, 0, 1000),
            Event(PHASE, "forward", 1, 100, 400),
            Event(PHASE, "backward", 1, 400, 900),
            Event(OP, "aten::addmm", 1, 150, 300),
            Event(OP, "aten::mm", 7, 450, 500),  # autograd's thread
            Event(OP, "aten::add_", 1, 950, 990),  # in no inner phase: the step's
            Event(OP, "aten::between", 1, 1000, 1100),  # after the step: no phase
            Event(OP, "aten::starts_at_the_boundary", 1, 400, 410),  # backward's, not forward's
        ]
    )
    assert rows["cpu", "forward", "aten::addmm"].count == 1
    assert ("cpu", "backward", "aten::mm") in rows
    assert ("cpu", "step", "aten::add_") in rows
    assert ("cpu", "", "aten::between") in rows
    assert ("cpu", "backward", "aten::starts_at_the_boundary") in rows


def test_of_two_scopes_starting_together_the_shorter_is_inner():
    rows = _rows(
        [
            Event(PHASE, "step", 1, 0, 1000),
            Event(PHASE, "data", 1, 0, 100),
            Event(OP, "aten::randn", 1, 10, 20),
        ]
    )
    assert ("cpu", "data", "aten::randn") in rows


def test_memory_goes_to_the_innermost_open_op_and_kernels_to_their_launchers_phase():
    rows = _rows(
        [
            Event(PHASE, "forward", 1, 0, 1000),
            Event(OP, "aten::empty", 1, 10, 50),
            Event(OP, "aten::empty_strided", 1, 20, 40),
            Event(MEMORY, "[memory]", 1, 30, 30, nbytes=256),
            Event(MEMORY, "[memory]", 1, 45, 45, nbytes=-64),  # in aten::empty itself
            Event(OP, "cudaLaunchKernel", 1, 60, 70, correlation=42),
            Event(KERNEL, "gemm", 99, 2000, 2500, link=42),
            Event(KERNEL, "orphan", 99, 3000, 3100, link=7),
        ]
    )
    assert rows["cpu", "forward", "aten::empty_strided"].self_cpu_memory_bytes == 256
    assert rows["cpu", "forward", "aten::empty"].self_cpu_memory_bytes == -64
    gemm = rows["cuda", "forward", "gemm"]
    assert gemm.self_s == gemm.total_s == pytest.approx(500e-9)
    assert ("cuda", "", "orphan") in rows


def test_rows_aggregate_by_device_phase_and_name_and_sort_by_self_time():
    table = profile_rows.summarize(
        [
            Event(PHASE, "forward", 1, 0, 1000),
            Event(OP, "b", 1, 0, 10),
            Event(OP, "b", 1, 20, 30),
            Event(OP, "a", 1, 40, 60),
            Event(OP, "c", 1, 70, 90),
            Event(OP, "ends_before_it_starts", 1, 95, 90),
        ]
    )
    assert [(r.name, r.count) for r in table] == [
        ("a", 1),
        ("b", 2),
        ("c", 1),
        ("ends_before_it_starts", 1),
    ]
    assert table[-1].self_s == 0.0


def test_the_record_keeps_the_rows_of_most_self_time_within_its_budget():
    rows = [
        profile_rows.Row(f"op{i:04d}" + "x" * 200, "forward", "cpu", 1, 1.0 / (i + 1), 1.0, 0.0)
        for i in range(1000)
    ]
    record = profiling.profile_record(3, ["cpu"], rows)
    text = json.dumps(record, separators=(",", ":"))
    assert len(text) < 64 << 10
    kept = len(record["ops"])
    assert 0 < kept < 1000 and record["dropped_rows"] == 1000 - kept
    assert record["ops"][0][0].startswith("op0000")
    assert record["dropped_self_s"] == pytest.approx(sum(r.self_s for r in rows[kept:]))
    assert "dropped_rows" not in profiling.profile_record(3, ["cpu"], rows[:5])


def test_names_are_made_acceptable_to_the_worker():
    assert profiling._clean("a\nb\x1b[31m") == "a?b?[31m"
    assert len(profiling._clean("é" * 2000).encode()) <= profiling.MAX_NAME_BYTES
    assert profiling._clean("\ud800x") == "?x"


def test_a_torch_without_activity_types_has_its_events_told_by_device_and_annotation():
    """torch 2.11's Kineto events have no activity_type (seen on the H200's image): the kind
    comes from the device and whether the event is a user annotation."""

    class Old:
        def __init__(self, device, annotation):
            self.device, self.annotation = device, annotation

        def device_type(self):
            return self.device

        def is_user_annotation(self):
            return self.annotation

    cpu, cuda = "CPU", "CUDA"
    assert profiling._activity(Old(cpu, False), cpu) == "cpu_op"
    assert profiling._activity(Old(cpu, True), cpu) == "user_annotation"
    assert profiling._activity(Old(cuda, False), cpu) == "kernel"
    assert profiling._activity(Old(cuda, True), cpu) == "gpu_user_annotation"


# --- a tiny model, run as a program cell runs it ----------------------------------------------

_PROGRAM = r"""
import torch
import scalebench_client as sb

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(16, 32), torch.randn(16, 4)
for _ in range(sb.profile_steps() + 1 + 2):  # warm-up 1, measured 2, then the profiled ones
    with sb.step():
        with sb.phase("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with sb.phase("backward"):
            optimizer.zero_grad()
            loss.backward()
        with sb.phase("optimizer"):
            optimizer.step()
sb.memory()
"""


def _records(tmp_path, program: str, python: str = sys.executable, args=(), **env) -> list:
    """The records of `program` (a script's text, or the path of one) run by `python` as a
    program cell of 1 warm-up and 2 measured training steps would run it."""
    path = Path(program) if program.endswith(".py") else tmp_path / "program.py"
    if not program.endswith(".py"):
        path.write_text(program)
    read, write = os.pipe()
    variables = dict(
        os.environ,
        SCALEBENCH_REPORT_FD=str(write),
        SCALEBENCH_TREE=str(tmp_path),
        SCALEBENCH_MODE="train",
        SCALEBENCH_WARMUP="1",
        SCALEBENCH_ITERATIONS="2",
        PYTHONPATH=str(CLIENT),
        **env,
    )
    done = subprocess.run(
        [python, str(path), *args],
        env=variables,
        cwd=path.parent,
        pass_fds=(write,),
        capture_output=True,
        timeout=300,
    )
    os.close(write)
    with os.fdopen(read) as channel:
        records = [json.loads(line) for line in channel if line.strip()]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return records


def test_a_torch_programs_profiled_steps_give_each_phase_its_operators(tmp_path):
    records = _records(tmp_path, _PROGRAM, SCALEBENCH_PROFILE_STEPS="2")
    steps = [r for r in records if r["type"] == "step"]
    assert [bool(s.get("profile")) for s in steps] == [False] * 3 + [True] * 2
    assert [s["warmup"] for s in steps] == [True] + [False] * 4
    (record,) = [r for r in records if r["type"] == "profile"]
    assert record["steps"] == 2 and "error" not in record
    assert record["activities"] == (["cpu", "cuda"] if _cuda() else ["cpu"])
    assert len(json.dumps(record)) < 64 << 10
    rows = {(op[2], op[1], op[0]): op for op in record["ops"]}
    assert rows["cpu", "forward", "aten::addmm"][3] == 2 * 2  # two layers, two steps
    backward = {name for device, phase, name in rows if phase == "backward"}
    assert {"aten::mm", "AddmmBackward0"} <= backward, backward
    optimizer = {name for device, phase, name in rows if phase == "optimizer"}
    assert any("add" in name for name in optimizer), optimizer
    assert "aten::addmm" not in {name for _, phase, name in rows if phase != "forward"}
    for name, phase, device, count, self_s, total_s, memory in record["ops"]:
        assert device in ("cpu", "cuda") and count > 0
        assert 0 <= self_s <= total_s + 1e-9 and math.isfinite(memory), (name, phase)
    self_times = [op[4] for op in record["ops"]]
    assert self_times == sorted(self_times, reverse=True)
    # The memory reported after the loop is the one kept before the profiler started.
    (memory,) = [r for r in records if r["type"] == "memory"]
    assert memory["kind"] == "rss" and memory["peak_bytes"] > 0
    assert [r["type"] for r in records].index("profile") < [r["type"] for r in records].index(
        "summary"
    )


def test_on_a_gpu_the_kernels_take_the_phase_of_the_op_that_launched_them(tmp_path):
    """On a CUDA device the profile holds the kernels (device time) beside the CPU operators,
    each in the phase of its launching operator, though it ran later on the GPU."""
    if not _cuda():
        pytest.skip("needs a CUDA device")
    program = _PROGRAM.replace("x, y = torch.randn(16, 32), torch.randn(16, 4)", "")
    program = program.replace(
        "optimizer = torch.optim",
        "model = model.cuda()\nx, y = torch.randn(16, 32).cuda(), torch.randn(16, 4).cuda()\n"
        "optimizer = torch.optim",
    )
    records = _records(tmp_path, program, SCALEBENCH_PROFILE_STEPS="2", SCALEBENCH_DEVICE="cuda")
    (record,) = [r for r in records if r["type"] == "profile"]
    assert record["activities"] == ["cpu", "cuda"], record
    kernels = [op for op in record["ops"] if op[2] == "cuda"]
    assert kernels, record["ops"][:10]
    phases = {op[1] for op in kernels}
    assert {"forward", "backward", "optimizer"} <= phases, phases
    for name, _phase, _device, count, self_s, total_s, memory in kernels:
        assert count > 0 and self_s == total_s and memory == 0, name
    (memory,) = [r for r in records if r["type"] == "memory"]
    assert memory["kind"] == "cuda" and memory["peak_bytes"] > 0
    print(json.dumps(sorted(kernels, key=lambda op: -op[4])[:8], indent=1))


def test_a_program_without_profile_steps_writes_no_profile(tmp_path):
    records = _records(tmp_path, _PROGRAM)
    assert not [r for r in records if r["type"] == "profile"]
    assert not [r for r in records if r["type"] == "step" and "profile" in r]
    assert len([r for r in records if r["type"] == "step"]) == 3


def test_a_program_that_stops_early_sends_the_profiled_steps_it_ran(tmp_path):
    program = _PROGRAM.replace("sb.profile_steps() + 1 + 2", "1 + 2 + 1")
    records = _records(tmp_path, program, SCALEBENCH_PROFILE_STEPS="3")
    (record,) = [r for r in records if r["type"] == "profile"]
    assert record["steps"] == 1 and record["ops"]


def test_the_jax_adapter_says_it_takes_no_profile(tmp_path):
    program = "import scalebench_client as sb, scalebench_client.jax\n" + (
        "for _ in range(4):\n    with sb.step():\n        pass\n"
    )
    records = _records(tmp_path, program, SCALEBENCH_PROFILE_STEPS="1")
    (record,) = [r for r in records if r["type"] == "profile"]
    assert record["steps"] == 0 and "JAX adapter" in record["error"]


def _lightning_python() -> str:
    """The frameworks' environment's Python (made by ./setup.sh test), or skip."""
    python = os.environ.get("SCALEBENCH_FRAMEWORKS_PYTHON") or str(
        CLIENT.parents[1] / ".venv-frameworks" / "bin" / "python"
    )
    if not os.path.exists(python):
        pytest.skip("no frameworks environment (./setup.sh test makes .venv-frameworks)")
    probe = subprocess.run([python, "-c", "import lightning, hydra"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{python} has no lightning or hydra")
    return python


def test_the_lightning_examples_profiled_steps_give_each_phase_its_operators(tmp_path):
    """The Lightning + Hydra example (docs/examples/programs/lightning_hydra/train.py, which
    names no profiler) as its cell runs it with profile_steps: 3, {steps} = 1 + 2 + 3: the
    adapter's phases are the profiler's scopes, the optimizer's own step apart from the
    closure's forward and backward inside it."""
    example = CLIENT.parents[1] / "docs" / "examples" / "programs" / "lightning_hydra"
    args = [
        "experiment=cnn",
        "data.batch_size=16",
        "data.samples=256",
        "model.width=8",
        "trainer.max_steps=6",
        f"hydra.run.dir={tmp_path / 'hydra'}",
    ]
    records = _records(
        tmp_path,
        str(example / "train.py"),
        python=_lightning_python(),
        args=args,
        SCALEBENCH_PROFILE_STEPS="3",
        PYTHONWARNINGS="ignore",
    )
    steps = [r for r in records if r["type"] == "step"]
    assert [bool(s.get("profile")) for s in steps] == [False] * 3 + [True] * 3
    (record,) = [r for r in records if r["type"] == "profile"]
    assert record["steps"] == 3 and "error" not in record, record
    by_phase: dict = {}
    for name, phase, _device, _count, self_s, total_s, _memory in record["ops"]:
        by_phase.setdefault(phase, set()).add(name)
        assert 0 <= self_s <= total_s + 1e-9
    assert "aten::convolution" in by_phase["forward"], by_phase
    assert "aten::convolution_backward" in by_phase["backward"], by_phase
    assert any(name.startswith("Optimizer.step#SGD") for name in by_phase["optimizer"])
    assert "aten::convolution" not in by_phase["optimizer"]  # the closure's are forward's
    assert by_phase.get("data"), by_phase
    assert [r["by"] for r in records if r["type"] == "ended"] == ["max_steps"]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
