"""The client's one GPU synchronisation (program/client/scalebench_client): ``phase(sync=True)``
and the Lightning adapter's ``SCALEBENCH_SYNC_PHASES=1`` wait for the device through the same
function, and only once the process has made its CUDA context: a program that never touched
the GPU is not made to create one inside a timed phase.

Run in a child interpreter with a stand-in ``torch`` (whose CUDA is available and counts its
synchronisations) and a stand-in Lightning profiler base, so the real torch of this suite is
left alone and no Lightning is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "program" / "client"

_SCRIPT = r"""
import json, os, sys, types

synchronised = []


class Cuda:
    initialized = False

    @staticmethod
    def is_available():
        return True

    @classmethod
    def is_initialized(cls):
        return cls.initialized

    @staticmethod
    def synchronize():
        synchronised.append(1)


torch = types.ModuleType("torch")
torch.cuda = Cuda
sys.modules["torch"] = torch
for name in ("lightning", "lightning.pytorch", "lightning.pytorch.profilers"):
    sys.modules[name] = types.ModuleType(name)


class Profiler:
    def __init__(self):
        pass


sys.modules["lightning.pytorch.profilers"].Profiler = Profiler

import scalebench_client as sb
from scalebench_client import lightning as sbl

through_client = []
client_synchronize = sb._synchronize


def counted():
    through_client.append(1)
    client_synchronize()


sb._synchronize = counted


class Inner:
    def start(self, action):
        pass

    def stop(self, action):
        pass


counts = {}
for initialized in (False, True):
    Cuda.initialized = initialized
    synchronised.clear()
    through_client.clear()
    with sb.step():
        with sb.phase("forward", sync=True):
            pass
    counts[f"phase {initialized}"] = [len(through_client), len(synchronised)]
    synchronised.clear()
    through_client.clear()
    profiler = sbl.make_phase_profiler(Inner())
    for action in ("run_training_batch", "[Strategy]S.training_step"):
        profiler.start(action)
    for action in ("[Strategy]S.training_step", "run_training_batch"):
        profiler.stop(action)
    counts[f"lightning {initialized}"] = [len(through_client), len(synchronised)]
print(json.dumps(counts))
"""


def test_phase_and_lightning_synchronise_once_cuda_is_initialised(tmp_path):
    read, write = os.pipe()
    env = dict(
        os.environ,
        PYTHONPATH=str(CLIENT),
        SCALEBENCH_REPORT_FD=str(write),
        SCALEBENCH_SYNC_PHASES="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        env=env,
        pass_fds=(write,),
        capture_output=True,
        text=True,
        timeout=120,
    )
    os.close(write)
    with os.fdopen(read) as channel:
        records = [json.loads(line) for line in channel if line.strip()]
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    # Two boundaries of one phase, four of a Lightning step (its begin and end, the phase's):
    # each goes through the client's function, which waits only with a CUDA context.
    assert counts == {
        "phase False": [2, 0],
        "phase True": [2, 2],
        "lightning False": [4, 0],
        "lightning True": [4, 4],
    }, counts
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == 4 and all("forward" in s["phases"] for s in steps), records
