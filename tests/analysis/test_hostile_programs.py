"""Program cells against programs that lie, flood and shout (issue 41 items 2-6; docs/programs.md,
docs/reliability.md#program-cells).

One `scalebench run` under mpirun (rank 0 and one worker) of tiny Python programs that write
their records by hand, one experiment each: a program with secrets in its `env`; steps at
impossible times (a step of 9.2e9 s, a start-up of -9e9 s, phases of +-1000 s inside a 1 us
step, an `end_ns` above int64); invalid UTF-8, a quote cut inside a character and raw terminal
escapes; an `outputs` record of 2^62 + 1 samples. Checked: the secrets are nowhere in the
results file (every attribute and dataset, `matrix_text` included) nor in the logs or the
console; each lying cell failed with its own reason quoting the record; every text attribute
is valid UTF-8 and no escape byte reaches the file, the console, the logs, `info`, `analyze`
or the report; no cell folder is left in the run's TMPDIR.

A second pair of runs measures the peak resident set of each rank (GNU time) under a flood of
2,000,000 step records and an endless line, against a healthy program: within 50 MB.

Needs a build: SCALEBENCH_BUILD_DIR (tests/run_all.sh sets it); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

from conftest import run_cli

BUILD = os.environ.get("SCALEBENCH_BUILD_DIR")
pytestmark = pytest.mark.skipif(not BUILD, reason="needs SCALEBENCH_BUILD_DIR (a build)")

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzEXAMPLEKEY",
    "HF_TOKEN": "hf_QqZsecretTOKENvalue1234567890",
}

#: Every program starts so: the report channel, and a helper writing one line to it.
PRELUDE = """\
import os, sys, time
fd = int(os.environ["SCALEBENCH_REPORT_FD"])
def send(line):
    os.write(fd, line if isinstance(line, bytes) else line.encode())
def step(begin, end, phases=""):
    send('{"v":1,"type":"step","warmup":false,"begin_ns":%d,"end_ns":%d,"phases":{%s}}\\n'
         % (begin, end, phases))
now = time.monotonic_ns()
"""

#: experiment -> (the program's body, a fragment of its cell's reason; "" for an ok cell).
PROGRAMS = {
    "secret-env": ("step(now, now + 1000)\nstep(now + 2000, now + 3000)\n", ""),
    "step-of-9e9-s": (
        "step(now, now + 9_200_000_000 * 10**9)\n",
        "a step outside the program's run",
    ),
    "startup-of-minus-9e9-s": (
        "step(now - 9_000_000_000 * 10**9, now)\n",
        "a step outside the program's run",
    ),
    "phases-of-1000-s": (
        "step(now, now + 1000, '\"f\":[%d,%d]' % (now - 1000 * 10**9, now + 1000 * 10**9))\n",
        "phase 'f' outside its step",
    ),
    "end-above-int64": (
        "step(now, 2**63 + 5)\n",
        "'end_ns' = 9223372036854775813 ns is above the largest CLOCK_MONOTONIC time",
    ),
    "invalid-utf8-phase": (
        'send(b\'{"v":1,"type":"step","begin_ns":1,"end_ns":2,'
        '"phases":{"\\xff\\xfe":[1,2]}}\\n\')\n',
        "not a JSON object",
    ),
    "quote-cut-in-a-character": (
        'send(\'{"v":1,"type":"nope","x":"\' + \'é\' * 150 + \'"}\\n\')\n',
        "unknown type 'nope'",
    ),
    "raw-escapes": (
        'send(b\'{"v":1,"type":"\\x1b[2J\\x1b]0;pwned\\x07"}\\n\')\n',
        "not a JSON object",
    ),
    "escapes-in-an-error": (
        'send(\'{"v":1,"type":"error","kind":"error",'
        '"message":"boom\\\\u001b[2J\\\\u001b]0;pwned\\\\u0007"}\\n\')\nsys.exit(1)\n',
        "boom\\x1b[2J\\x1b]0;pwned\\x07",
    ),
    "outputs-of-2-62-samples": (
        "open(os.environ['SCALEBENCH_OUTPUTS_FILE'], 'wb').write(b'\\0' * 4)\n"
        'send(\'{"v":1,"type":"outputs","samples":%d,"shape":[1]}\\n\' % (2**62 + 1))\n',
        "outputs of more than 1024 MiB",
    ),
}


def write_matrix(work: Path, programs: dict, **defaults) -> Path:
    experiments = []
    for name, body in programs.items():
        (work / f"{name}.py").write_text(PRELUDE + body)
        program = {"command": [sys.executable, f"{name}.py"]}
        if name == "secret-env":
            program["env"] = dict(SECRETS, OMP_NUM_THREADS="1")
        experiment = {"name": name, "program": program}
        if name.startswith("outputs"):
            experiment["validate"] = True
        experiments.append(experiment)
    base = {"device": "cpu", "warmup": 0, "iterations": 2, "timeout_s": 60}
    matrix = {
        "name": "hostile",
        "defaults": dict(base, **defaults),
        "sweep": {"modes": ["infer"], "batch_sizes": [1], "world_sizes": [1]},
        "experiments": experiments,
    }
    (work / "matrix.yaml").write_text(json.dumps(matrix))
    return work / "matrix.yaml"


def scalebench(work: Path, *wrapper: str) -> subprocess.CompletedProcess:
    """`mpirun -np 2 [WRAPPER] scalebench run` of WORK/matrix.yaml into WORK/results.h5, with
    TMPDIR = WORK/tmp (where the cells' folders go)."""
    (work / "tmp").mkdir(exist_ok=True)
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        TMPDIR=str(work / "tmp"),
    )
    command = ["mpirun", "-np", "2", "--oversubscribe", "-x", "TMPDIR", *wrapper]
    command += [f"{BUILD}/bin/scalebench", "run", str(work / "matrix.yaml")]
    command += ["-o", str(work / "results.h5"), "--force"]
    return subprocess.run(command, env=env, capture_output=True, timeout=300, cwd=work)


def every_text(path: Path) -> list[tuple[str, bytes]]:
    """(where, bytes) of every attribute and of every dataset's bytes in the file; `where` of a
    numeric dataset ends in "#numbers" (its bytes are floats, not text)."""
    found = []

    def attributes(name, obj):
        for key in obj.attrs:
            value = obj.attrs.get(key)
            found.append(
                (f"{name}@{key}", value if isinstance(value, bytes) else repr(value).encode())
            )
        if isinstance(obj, h5py.Dataset):
            data = obj[()]
            where = name if obj.dtype.kind in "SUO" else f"{name}#numbers"  # raw floats
            found.append((where, data.tobytes() if hasattr(data, "tobytes") else bytes(data)))

    with h5py.File(path, "r") as f:
        attributes("/", f)
        f.visititems(attributes)
    return found


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    write_matrix(work, {name: body for name, (body, _) in PROGRAMS.items()})
    done = scalebench(work)
    info = subprocess.run(
        [f"{BUILD}/bin/scalebench", "info", str(work / "results.h5")],
        capture_output=True,
        timeout=60,
    )
    return work, done, info


def cells_by_experiment(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return {
            cell.attrs["experiment"].decode(): {k: cell.attrs[k] for k in cell.attrs}
            for cell in f["cells"].values()
        }


def test_every_lie_fails_its_cell_with_its_own_reason_and_the_sweep_goes_on(hostile):
    work, done, _ = hostile
    assert done.returncode == 1, done.stdout.decode() + done.stderr.decode()  # failed cells
    cells = cells_by_experiment(work / "results.h5")
    assert set(cells) == set(PROGRAMS)
    for name, (_, why) in PROGRAMS.items():
        status = cells[name]["status"].decode()
        reason = cells[name]["reason"].decode("utf-8")  # strict: valid UTF-8
        if not why:
            assert status == "ok", (name, reason)
            continue
        assert status == "failed", (name, status, reason)
        assert why in reason, (name, reason)
        if name != "escapes-in-an-error":  # its reason is the error record's message
            assert "in record '" in reason, (name, reason)  # the record is quoted


def test_secrets_are_stored_nowhere_and_logged_nowhere(hostile):
    work, done, info = hostile
    places = every_text(work / "results.h5")
    places += [
        (str(p), p.read_bytes()) for p in (work / "results.h5.logs").rglob("*") if p.is_file()
    ]
    places += [("console", done.stdout + done.stderr), ("info", info.stdout + info.stderr)]
    assert any(where.endswith("@matrix_text") for where, _ in places)
    for name, secret in SECRETS.items():
        for where, data in places:
            assert secret.encode() not in data, (name, where)
    with h5py.File(work / "results.h5", "r") as f:
        stored = f.attrs["matrix_text"].decode()
    assert "<not stored>" in stored and "OMP_NUM_THREADS" in stored, stored


def test_text_from_programs_is_valid_utf8_and_never_a_raw_escape(hostile):
    work, done, info = hostile
    for where, data in every_text(work / "results.h5"):
        if where.endswith(("@reason", "@matrix_text", "program_output")):
            data.decode("utf-8")  # strict
        if not where.endswith("#numbers"):
            assert b"\x1b" not in data and b"\x07" not in data, where
    analyze = run_cli("analyze", str(work / "results.h5"))
    shown = {
        "console": done.stdout + done.stderr,
        "info": info.stdout + info.stderr,
        "analyze": (analyze.stdout + analyze.stderr).encode(),
    }
    shown.update({str(p): p.read_bytes() for p in (work / "results.h5.logs").rglob("*.log")})
    assert any(b"\\x1b[2J" in text for text in shown.values())  # shown, escaped
    for where, text in shown.items():
        assert b"\x1b" not in text and b"\x07" not in text, where
        text.decode("utf-8")


def test_no_cell_leaves_its_folder(hostile):
    work, _, _ = hostile
    assert list((work / "tmp").iterdir()) == []


FLOODS = {
    # 2,000,000 step records as fast as the pipe takes them.
    "steps": (
        'line = (\'{"v":1,"type":"step","warmup":false,"begin_ns":%d,"end_ns":%d}\\n\''
        " % (now, now + 1)).encode()\n"
        "for _ in range(2000):\n    send(line * 1000)\n"
    ),
    # One line without end: 80 MB, in 1 MB writes (GNU time's peak is the largest of the rank
    # and its children: the program itself stays small).
    "endless-line": (
        'send(b\'{"v":1,"type":"metric","name":"\')\n'
        "chunk = b'x' * 1_000_000\nfor _ in range(80):\n    send(chunk)\n"
    ),
}


def peak_rss_kib(work: Path) -> dict:
    """{rank: peak resident set in KiB} of a run under GNU time."""
    rss = work / "rss.txt"
    wrapper = [
        "sh",
        "-c",
        f'exec /usr/bin/time -a -o {rss} -f "$OMPI_COMM_WORLD_RANK %M" "$0" "$@"',
    ]
    done = scalebench(work, *wrapper)
    # GNU time adds "Command exited with non-zero status 1" before its line for a failed rank.
    lines = [line.split() for line in rss.read_text().splitlines()]
    peaks = {int(f[0]): int(f[1]) for f in lines if len(f) == 2 and all(x.isdigit() for x in f)}
    return done, peaks


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="needs GNU time")
def test_a_flood_of_records_keeps_every_rank_within_50_mb_of_a_healthy_run(tmp_path):
    healthy = tmp_path / "healthy"
    flood = tmp_path / "flood"
    for work, programs in ((healthy, {"healthy": PROGRAMS["secret-env"][0]}), (flood, FLOODS)):
        work.mkdir()
        write_matrix(work, programs)
    _, base = peak_rss_kib(healthy)
    done, peaks = peak_rss_kib(flood)
    cells = cells_by_experiment(flood / "results.h5")
    assert "more than 104 steps" in cells["steps"]["reason"].decode(), cells["steps"]
    assert "a record above 64 KiB" in cells["endless-line"]["reason"].decode()
    assert set(peaks) == set(base) == {0, 1}, (peaks, base)
    for rank in (0, 1):
        grown_mb = (peaks[rank] - base[rank]) * 1024 / 1e6
        assert grown_mb < 50, (rank, peaks, base, done.stdout.decode()[-2000:])
