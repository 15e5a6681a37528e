"""The client installs into a user's own environment the way docs/programs.md#the-client says,
and leaves the checkout as it was (issue 54 row 9): its build backend, flit_core, builds the
wheel outside the source tree (setuptools wrote program/client/build/ and *.egg-info into it).

The environment is a fresh virtualenv that borrows pip and flit_core from the running one
through a .pth file (as docs/examples/programs/run_demo.sh borrows torch), so the documented
offline form runs without the network: `python -m pip install --no-build-isolation --no-index
<scalebench>/program/client`."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "program" / "client"


def _status() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--ignored", "--", "program/client"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pip_install_of_the_client_leaves_the_checkout_untouched(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to compare the tree with")
    assert importlib.util.find_spec("flit_core"), (
        "flit_core is missing from this environment (analysis/requirements.txt; ./setup.sh "
        "installs it): the client's build backend"
    )
    before = _status()
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    install += ["--no-build-isolation", "--no-index", str(CLIENT)]
    done = subprocess.run(install, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr

    assert _status() == before, "pip install wrote into the checkout:\n" + _status()
    probe = (
        "import importlib.metadata as m, scalebench_client as sb; print(sb.__file__); "
        "print(sorted(e.value for e in m.entry_points(group='lightning.pytorch.callbacks_factory')"
        " if e.name == 'scalebench'))"
    )
    done = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    imported, entry_points = done.stdout.splitlines()
    assert Path(imported).is_relative_to(Path(site)), imported  # the installed copy
    assert entry_points == "['scalebench_client.lightning:callbacks']", entry_points
