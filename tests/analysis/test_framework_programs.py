"""The frameworks' adapters on real runs (docs/programs.md#frameworks): the results files of
docs/examples/programs/lightning_hydra/run_demo.sh (Lightning + Hydra, two branches, DDP at
world sizes 1 and 2), jax_mlp/program.yaml and keras_mlp/program.yaml, run by
tests/run_all.sh with the frameworks' own environment (.venv-frameworks) and named in
SCALEBENCH_LIGHTNING_FILE, SCALEBENCH_JAX_FILE, SCALEBENCH_KERAS_FILE; each test is skipped
without its file.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from programfiles import (
    measured,
    measured_starts,
    read_program_cells,
    record_gaps,
    shares,
    step_gaps,
)

from conftest import run_cli


def _file(variable: str) -> str:
    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"needs a real run with the frameworks' environment: {variable}")
    assert os.path.isfile(path), path
    return path


@pytest.fixture(scope="module")
def lightning_file() -> str:
    return _file("SCALEBENCH_LIGHTNING_FILE")


@pytest.fixture(scope="module")
def lightning_tasks_file() -> str:
    return _file("SCALEBENCH_LIGHTNING_TASKS_FILE")


@pytest.fixture(scope="module")
def jax_file() -> str:
    return _file("SCALEBENCH_JAX_FILE")


@pytest.fixture(scope="module")
def keras_file() -> str:
    return _file("SCALEBENCH_KERAS_FILE")


LIGHTNING_PHASES = ("data", "hooks", "h2d", "forward", "zero_grad", "backward", "optimizer")
#: The phases of a Lightning step one after another, in the order its loop runs them
#: (scalebench_client/lightning.py); `hooks` is the sum of the hook calls between them.
LIGHTNING_ORDER = ("data", "h2d", "forward", "zero_grad", "backward", "optimizer")


def test_lightning_reports_its_phases_on_every_rank_of_both_branches(lightning_file):
    cells = read_program_cells(lightning_file)
    seen = set()
    for cell in cells.values():
        attrs = cell["attrs"]
        seen.add((attrs["branch"], int(attrs["world_size"])))
        assert attrs["effective_program_framework"] == "lightning", attrs
        assert set(cell["phases"]) == {*LIGHTNING_PHASES, "step"}, cell["phases"]
        world = int(attrs["world_size"])
        assert cell["timings"].shape[0] == world
        # Hydra overrides, one argv element each, with the cell's layout filled in.
        for argv in cell["argv"]:
            assert f"trainer.devices={world}" in argv and "trainer.num_nodes=1" in argv, argv
            assert "trainer.max_steps=22" in argv, argv  # {steps}: 2 warm-up + 20 measured
        share = shares(cell, LIGHTNING_PHASES)
        assert np.all(share <= 1 + 1e-9)  # no time counted twice
        step = measured(cell, "step")
        hooks = measured(cell, "hooks")
        hooks_begin = measured_starts(cell, "hooks")
        step_begin = measured_starts(cell, "step")
        for rank in range(world):
            gaps = record_gaps(cell, rank, LIGHTNING_ORDER)
            where = (attrs["branch"], world, rank)
            # Every step has every phase, one after another in the loop's order and inside
            # its step, with the hooks inside the step too: guards against a phase bracketed
            # at the wrong action (a begin or end moved, the optimizer's own update not
            # split from its closure, a step that begins or ends at another action). Exact:
            # the load of the machine moves no boundary across another.
            assert np.all(np.isfinite(gaps)), (where, gaps)
            assert np.all(gaps >= -1e-9), (where, gaps)
            assert np.all(hooks_begin[rank] >= step_begin[rank] - 1e-9), where
            hooks_end = hooks_begin[rank] + hooks[rank]
            assert np.all(hooks_end <= step_begin[rank] + step[rank] + 1e-9), where
            # The time the client could have lost: the gaps between its records, less the
            # hooks it recorded inside them. Guards against time of a phase the client did
            # not record (the rest of the gaps is Lightning's own loop code between its
            # profiled actions, a few hundred microseconds a step on this CPU): within 2 % of
            # the step. Each gap is taken as its median over the steps, not the step's share:
            # a busy machine preempts the program in a gap of some steps (issue 43: 98.99 %
            # under load), and a gap preempted in fewer than half of the steps does not move
            # its median, while time lost in most steps still does. 2 %, not 1 %: a world-2
            # cell on 2 cores beside rank 0 is preempted in most steps (stop 52's fresh-clone
            # CI: 0.91 ms of a 75.6 ms step, 1.2 %); a phase left unrecorded (the optimizer's
            # update, a data batch) costs far more than 1.5 ms of this step.
            lost = np.median(gaps, axis=0).sum() - np.median(hooks[rank])
            typical = np.median(step[rank])
            assert lost <= 0.02 * typical, (where, np.median(gaps, axis=0), typical)
    assert seen == {(b, w) for b in ("main", "bf16-channels-last") for w in (1, 2)}
    # Start-up: the program's launch to its first step (imports, Hydra, model, DDP setup).
    for cell in cells.values():
        for metrics in cell["metrics"]:
            assert 0 < metrics["program_startup_s"] < 300, metrics


def test_the_bf16_channels_last_branch_computes_what_main_computes(lightning_file):
    """train.py hands its trained model's logits on fixed images; with baseline: {branch:
    main} the optimised branch's are compared with main's (Note [Accuracy across cells]):
    bf16-mixed + channels-last passes at the default tolerance, main is the baseline."""
    cells = {
        (c["attrs"]["branch"], int(c["attrs"]["world_size"])): c
        for c in read_program_cells(lightning_file).values()
    }
    for world in (1, 2):
        assert cells[("main", world)]["accuracy"] is None
        accuracy = cells[("bf16-channels-last", world)]["accuracy"]
        assert accuracy is not None and accuracy["kind"] == "outputs", world
        assert accuracy["verdict"] == "passed", (world, accuracy["failed_checks"])
        assert accuracy["reference_cell"] == cells[("main", world)]["cell_id"]
        assert accuracy["validation_samples"] == 64


def test_lightning_branches_differ_and_compare_gives_a_verdict(lightning_file):
    gate = run_cli("compare", lightning_file, "--branches", "main", "bf16-channels-last")
    assert gate.returncode in (0, 1), gate.stderr
    verdicts = ("improvement", "regression", "within threshold", "not significant")
    verdicts += ("inconclusive",)  # one run per branch (issue 40)
    assert sum(gate.stdout.count(v) for v in verdicts) >= 2, gate.stdout
    analyze = run_cli(
        "analyze", lightning_file, "--baseline-branch", "main", "--details", check_rc=0
    )
    assert "program:lightning" in analyze.stdout, "labelled with the framework it reported"


def test_a_cytodl_task_file_runs_train_py_with_each_rows_overrides(lightning_tasks_file):
    """lightning_hydra/tasks.csv with its program template: each row ran the real train.py
    on its branch with its own Hydra overrides, as the stored argv and the program's own
    output (it prints the config it trained with) show."""
    rows = {}
    for cell in read_program_cells(lightning_tasks_file).values():
        rows[cell["attrs"]["branch"]] = cell
    assert set(rows) == {"main", "bf16-channels-last"}
    expected = {"main": ("model.width=32", 1), "bf16-channels-last": ("model.width=16", 2)}
    for branch, (width, world) in expected.items():
        cell = rows[branch]
        assert int(cell["attrs"]["world_size"]) == world  # from the row's trainer.devices
        for argv in cell["argv"]:
            assert argv[1:4] == ["train.py", "experiment=cnn", "trainer=cpu"], argv
            assert width in argv and f"trainer.devices={world}" in argv, argv
            assert not any(a.startswith("scalebench.") for a in argv), argv
        # Rank 0's program printed what it trained with (Hydra applied the overrides).
        assert f"({width}, precision=" in cell["output"][0], cell["output"][0]
        assert f"world size {world})" in cell["output"][0], cell["output"][0]
    assert "precision=bf16-mixed" in rows["bf16-channels-last"]["output"][0]


def test_jax_compilation_is_apart_from_the_steps_which_match_the_scripts_clock(jax_file):
    for cell_id, cell in read_program_cells(jax_file).items():
        assert cell["attrs"]["effective_program_framework"] == "jax"
        assert cell["phases"] == ["data", "compute", "step"], cell["phases"]
        for metrics in cell["metrics"]:
            assert metrics["program_compile_s"] > 0, (cell_id, metrics)
            step = measured(cell, "step")[0]
            begin = measured_starts(cell, "step")[0]
            outside = metrics["program_outside_measured_s"]
            # The steps match the script's clock around them (time.monotonic from the first
            # measured step to after the last): the records lie inside it, one after
            # another, and the client loses no time between them. Guards against a step
            # record that misses part of its step or counts time of another (the client's
            # own records, the compilation). Exact where it can be: the sum and the order.
            # The gaps between steps (the loop's own code) are taken as their median, and the
            # span of the records against the script's clock is two short moments (before
            # the first step, the metric call after the last): a busy machine preempting
            # the program between a few steps moved the sum of the gaps past 2 % (issue 43).
            assert step.sum() <= outside + 1e-6, (cell_id, step.sum(), outside)
            gaps = step_gaps(cell, 0)
            assert np.all(gaps >= -1e-9), (cell_id, gaps)
            assert np.median(gaps) < 0.02 * np.median(step), (cell_id, gaps, step)
            span = begin[-1] + step[-1] - begin[0]
            assert outside - span < 0.02 * outside, (cell_id, span, outside)
            # Compilation is not in the steps: the first step is not the compile's length.
            assert (
                cell["timings"][0, 0, cell["phases"].index("step")] < metrics["program_compile_s"]
            )


def test_keras_reports_each_training_batch(keras_file):
    for cell in read_program_cells(keras_file).values():
        attrs = cell["attrs"]
        assert attrs["effective_program_framework"] == "keras", attrs
        assert cell["phases"] == ["data", "train_step", "step"], cell["phases"]
        assert cell["timings"].shape[1] == int(attrs["warmup_iterations"]) + int(
            attrs["measured_iterations"]
        )
        assert np.all(measured(cell, "train_step") > 0)
        assert np.allclose(shares(cell, ("data", "train_step")), 1.0, atol=1e-6)


#: A tf.keras training script with the Keras adapter's callback (docs/programs.md#keras).
_TF_KERAS_SCRIPT = """
import numpy as np
import tensorflow as tf
import scalebench_client.keras as sbk

model = tf.keras.Sequential([tf.keras.layers.Input((8,)), tf.keras.layers.Dense(4)])
model.compile(optimizer="sgd", loss="mse")
x = np.random.rand(64, 8).astype("float32")
y = np.random.rand(64, 4).astype("float32")
model.fit(x, y, batch_size=8, epochs=1, callbacks=[sbk.callback()], verbose=0)
"""


def _program_records(tmp_path, python: str, script: str, args: list, mode: str, **extra) -> list:
    """The report records of `script` run by `python` as a program cell of `mode` would run
    it (the report channel a worker opens, the client from this tree), after it exited 0."""
    import json
    import subprocess

    path = tmp_path / "program.py"
    path.write_text(script)
    read, write = os.pipe()
    client = os.path.join(os.path.dirname(__file__), "..", "..", "program", "client")
    env = dict(
        os.environ,
        SCALEBENCH_REPORT_FD=str(write),
        SCALEBENCH_MODE=mode,
        SCALEBENCH_WARMUP="1",
        PYTHONPATH=os.path.abspath(client),
        **extra,
    )
    done = subprocess.run(
        [python, str(path), *args], env=env, pass_fds=(write,), capture_output=True, timeout=600
    )
    os.close(write)
    with os.fdopen(read) as channel:
        records = [json.loads(line) for line in channel if line.strip()]
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return records


def _tensorflow_python() -> str:
    """A Python with TensorFlow (SCALEBENCH_TF_PYTHON, else the frameworks' environment),
    or skip: CI runs Keras 3 on JAX and installs no TensorFlow."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.environ.get("SCALEBENCH_TF_PYTHON", ""),
        os.path.join(here, "..", "..", ".venv-frameworks", "bin", "python"),
    ]
    for python in filter(None, candidates):
        if not os.path.exists(python):
            continue
        probe = subprocess.run([python, "-c", "import tensorflow"], capture_output=True)
        if probe.returncode == 0:
            return python
    pytest.skip("no TensorFlow installed (set SCALEBENCH_TF_PYTHON to a Python that has it)")
    return ""


def test_tf_keras_reports_each_batch_where_tensorflow_is_installed(tmp_path):
    """The Keras adapter with tf.keras (TensorFlow's Keras), on the report channel a worker
    opens: one step record per batch of fit, each with its data and train_step phases."""
    records = _program_records(
        tmp_path, _tensorflow_python(), _TF_KERAS_SCRIPT, [], "train", TF_CPP_MIN_LOG_LEVEL="3"
    )
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 64 // 8, records
    assert all(set(s["phases"]) == {"data", "train_step"} for s in steps[1:]), steps
    assert [r["framework"] for r in records if r["type"] == "hello"] in (["keras"], ["tensorflow"])


#: A Lightning program that evaluates a small module (Note [Lightning evaluation loops]): 40
#: samples in batches of 8, through each loop argv names (test, predict); the module's
#: batch-end hook stands for post-processing (CytoDL writes its images there).
_LIGHTNING_EVAL_SCRIPT = """
import sys, time
import torch
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(16, 4)
    def test_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("test_loss", loss)
    def predict_step(self, batch, batch_idx):
        return self.layer(batch[0])
    def on_test_batch_end(self, outputs, batch, batch_idx, dataloader_idx=0):
        time.sleep(0.002)
    on_predict_batch_end = on_test_batch_end

data = DataLoader(TensorDataset(torch.randn(40, 16), torch.randn(40, 4)), batch_size=8)
trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False)
for loop in sys.argv[1:]:
    getattr(trainer, loop)(Net(), dataloaders=data)
"""


def _lightning_python() -> str:
    """The frameworks' environment's Python (made by ./setup.sh test), or skip."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    python = os.environ.get("SCALEBENCH_FRAMEWORKS_PYTHON") or os.path.join(
        here, "..", "..", ".venv-frameworks", "bin", "python"
    )
    if not os.path.exists(python):
        pytest.skip("no frameworks environment (./setup.sh test makes .venv-frameworks)")
    probe = subprocess.run([python, "-c", "import lightning"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"{python} has no lightning")
    return python


def _lightning_eval_records(tmp_path, loops: list, mode: str) -> list:
    """The records of the evaluation script run as a program cell of `mode` would be (the
    client's entry point adds the callback; the script names no scalebench)."""
    return _program_records(
        tmp_path, _lightning_python(), _LIGHTNING_EVAL_SCRIPT, loops, mode, PYTHONWARNINGS="ignore"
    )


def test_lightning_evaluation_loops_report_each_batch_of_an_inference_cell(tmp_path):
    """Note [Lightning evaluation loops]: in an inference cell each batch of Trainer.test and
    Trainer.predict is one step with data, h2d, forward and post (the batch-end hook) phases,
    inside the step's span; each loop's end is reported (dataloader_end, 5 batches). Guards
    against an inference row of a Lightning program being one wall time (issue 39 item 4)."""
    records = _lightning_eval_records(tmp_path, ["test", "predict"], "infer")
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 2 * 40 // 8, records
    for step in steps:
        phases = step["phases"]
        assert {"data", "h2d", "forward", "post"} <= set(phases), phases
        for begin, end in phases.values():
            assert step["begin_ns"] <= begin <= end <= step["end_ns"], step
        assert phases["post"][1] - phases["post"][0] >= 2_000_000 * 0.9  # the 2 ms sleep
    ended = [r for r in records if r["type"] == "ended"]
    assert [r["by"] for r in ended] == ["dataloader_end"] * 2, ended
    assert "test loop ran out of batches after 5" in ended[0]["message"], ended
    assert "predict loop ran out of batches after 5" in ended[1]["message"], ended
    # Note [Lightning segments]: each loop and its set-up (checkpoint restores happen there).
    named = [r["name"] for r in records if r["type"] == "segment"]
    assert sorted(named) == sorted(
        ["data_setup", "model_setup", "test"] * 1 + ["data_setup", "model_setup", "predict"]
    ), named


def test_lightning_evaluation_of_a_training_cell_reports_no_step(tmp_path):
    """A training cell's program that only evaluates reports no step: evaluation batches are
    steps of inference cells alone, never mixed into a training cell's steps."""
    records = _lightning_eval_records(tmp_path, ["test"], "train")
    assert not [r for r in records if r["type"] in ("step", "ended")], records


#: A Lightning program that trains with a validation loop each epoch and the default
#: ModelCheckpoint (one save an epoch), then tests (Note [Lightning segments]).
_LIGHTNING_FIT_SCRIPT = """
import sys
import torch
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(16, 4)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)
    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))
    test_step = validation_step
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

data = DataLoader(TensorDataset(torch.randn(32, 16), torch.randn(32, 4)), batch_size=8)
trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, max_epochs=2,
                     enable_progress_bar=False, enable_model_summary=False,
                     default_root_dir=sys.argv[1])
net = Net()
trainer.fit(net, train_dataloaders=data, val_dataloaders=data)
trainer.test(net, dataloaders=data)
"""


def test_lightning_reports_the_run_level_segments_of_fit_and_test(tmp_path):
    """Note [Lightning segments] (issue 39 item 5): around the steps a training cell's
    Lightning program reports data_setup and model_setup per stage, the sanity check, fit,
    train, each validation loop and each checkpoint save, and the test loop; each segment
    lies where Lightning runs it (validations and saves inside train, train inside fit, the
    steps inside train). Guards against the time outside the steps being unaccounted."""
    records = _program_records(
        tmp_path,
        _lightning_python(),
        _LIGHTNING_FIT_SCRIPT,
        [str(tmp_path / "root")],
        "train",
        PYTHONWARNINGS="ignore",
    )
    segments: dict = {}
    for record in records:
        if record["type"] == "segment":
            assert record["begin_ns"] <= record["end_ns"], record
            segments.setdefault(record["name"], []).append((record["begin_ns"], record["end_ns"]))
    counts = {name: len(spans) for name, spans in segments.items()}
    assert counts == {
        "data_setup": 2,  # fit, then test
        "model_setup": 2,
        "sanity_check": 1,
        "fit": 1,
        "train": 1,
        "validation": 2,  # one an epoch; the sanity check is not one
        "checkpoint_save": 2,  # ModelCheckpoint: one an epoch
        "test": 1,
    }, counts
    (fit,), (train,), (test,) = segments["fit"], segments["train"], segments["test"]
    assert fit[0] <= train[0] <= train[1] <= fit[1]
    for begin, end in segments["validation"] + segments["checkpoint_save"]:
        assert train[0] <= begin <= end <= train[1]
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 2 * 32 // 8
    assert all(train[0] <= s["begin_ns"] <= s["end_ns"] <= train[1] for s in steps)
    (sanity,) = segments["sanity_check"]
    assert fit[0] <= sanity[0] <= sanity[1] <= train[0]
    assert segments["data_setup"][0][1] <= segments["model_setup"][0][0] <= fit[0]
    assert fit[1] <= segments["data_setup"][1][0] <= segments["model_setup"][1][1] <= test[0]


#: A Lightning program that names no scalebench: trains a little, with a validation loader;
#: argv[1] "own" hands its own outputs (ones), "submodule" has a validation_step that calls
#: the layer itself and returns the predictions, "losses_only" one that calls the layer
#: itself and returns the loss alone (Note [Lightning outputs]).
_LIGHTNING_OUTPUTS_SCRIPT = """
import sys
import torch
import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(16, 4)
    def forward(self, x):
        return self.layer(x)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)
    def validation_step(self, batch, batch_idx):
        x, y = batch
        if sys.argv[1] == "submodule":
            pred = self.layer(x)
            self.log("val_loss", torch.nn.functional.mse_loss(pred, y))
            return {"loss": torch.nn.functional.mse_loss(pred, y), "pred": pred}
        if sys.argv[1] == "losses_only":  # CytoDL's shape: its backbone, then losses only
            loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.log("val_loss", loss)
            return {"loss": loss}
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

pl.seed_everything(0)
data = TensorDataset(torch.randn(32, 16), torch.randn(32, 4))
trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, max_steps=4,
                     enable_progress_bar=False, enable_model_summary=False,
                     enable_checkpointing=False, num_sanity_val_steps=0)
net = Net()
trainer.fit(net, train_dataloaders=DataLoader(data, batch_size=8, shuffle=True),
            val_dataloaders=DataLoader(data, batch_size=8))
if sys.argv[1] == "own":
    import scalebench_client as sb
    sb.outputs(torch.ones(3, 2))
"""


def _lightning_outputs(tmp_path, variant: str):
    """(the records, the float32 outputs file's values) of the outputs script."""
    outputs = tmp_path / f"{variant}.f32"
    records = _program_records(
        tmp_path,
        _lightning_python(),
        _LIGHTNING_OUTPUTS_SCRIPT,
        [variant],
        "train",
        PYTHONWARNINGS="ignore",
        SCALEBENCH_OUTPUTS_FILE=str(outputs),
        SCALEBENCH_VALIDATION_SAMPLES="6",
    )
    handed = [r for r in records if r["type"] == "outputs"]
    values = np.fromfile(outputs, dtype="<f4") if outputs.exists() else None
    return handed, values


def test_lightning_hands_the_outputs_of_a_fixed_batch_without_the_programs_help(tmp_path):
    """Note [Lightning outputs] (issue 39 item 6): with validate: true a program that never
    calls scalebench_client.outputs still gets the accuracy check: the adapter runs the
    module's validation_step on the first validation batch and hands what forward returned
    (6 samples asked of a batch of 8, 4 logits each); a validation_step that calls its layers
    itself hands its returned predictions, one that returns losses only what its submodule
    returned; a program's own outputs win."""
    handed, values = _lightning_outputs(tmp_path, "forward")
    assert [(r["samples"], r["shape"]) for r in handed] == [(6, [4])], handed
    assert values.shape == (6 * 4,) and np.all(np.isfinite(values))
    # Without a forward call: the step's per-sample tensors (its `pred`; the scalar loss is
    # no sample's), the same numbers as forward's.
    submodule_dir = tmp_path / "submodule"
    submodule_dir.mkdir()
    handed, from_step = _lightning_outputs(submodule_dir, "submodule")
    assert [(r["samples"], r["shape"]) for r in handed] == [(6, [4])], handed
    assert np.allclose(from_step, values)
    own_dir = tmp_path / "own"
    own_dir.mkdir()
    # A step that returns losses only (CytoDL's validation_step): what its first-level
    # submodule returned, the same numbers again.
    losses_dir = tmp_path / "losses_only"
    losses_dir.mkdir()
    handed, from_child = _lightning_outputs(losses_dir, "losses_only")
    assert [(r["samples"], r["shape"]) for r in handed] == [(6, [4])], handed
    assert np.allclose(from_child, values)
    handed, own = _lightning_outputs(own_dir, "own")
    assert [(r["samples"], r["shape"]) for r in handed] == [(3, [2])], handed
    assert np.array_equal(own, np.ones(6, dtype="<f4"))
