"""Projections stored in the results file they were fitted on (`project --store`), and read
back to be compared with a later run (`project NEW.h5 --against OLD.h5`).

Note [Stored projections]
~~~~~~~~~~~~~~~~~~~~~~~~~
A projection is a claim about a run not yet made: the allocation it helps to ask for is
measured weeks later, by then with another build and other probe files. So `--store`
keeps the claim with the measurements it came from: `/projections/<k>` (k = 0, 1, ... in
the order stored, never overwritten) holds the whole projection as one JSON document (the
rows at machine precision, the check, the inputs as lines and as values per curve: the
cells fitted on, gradient bytes, bucket caps, the gradient-ready curve, each link fit and
the overhead; what was missing) and as attributes the options, the probe files with their
fits, when and by which tool version it was made. docs/results-file.md#projections is the
layout.

The analysis package otherwise never writes a results file; this one group is appended
under the results file's own rules: the run lock `<file>.lock` is taken first (Note [One
writer per results file]: refused while a run holds it), the file is copied, the copy
changed and closed, fsynced and renamed over the original, and the directory fsynced (Note
[Results durability]), so a reader never sees a half-written file and a kill leaves the
old file. Rejected: a separate projection file (it loses the tie to the cells it was
fitted on and is one more file to keep); the C++ store (the projection is computed here,
and handing its document to a C++ command only to write one string would add a process
and a second serialisation).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import importlib.metadata
import json
import os
import shutil
import socket
from contextlib import contextmanager

import h5py

from ..errors import ResultsFileError, UsageError

GROUP = "projections"
DOCUMENT = "document"
#: The version of the stored group's layout (its JSON document's keys).
STORED_VERSION = "1"


def _version() -> str:
    try:
        return importlib.metadata.version("scalebench_analysis")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


@contextmanager
def _run_lock(path: str):
    """The results file's writer lock (results/lock.h): flock on `<path>.lock`, non-blocking;
    UsageError while a `scalebench run` holds it."""
    lock_path = path + ".lock"
    created = not os.path.exists(lock_path)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with open(lock_path, encoding="utf-8", errors="replace") as holder:
                who = holder.read().strip() or "another process"
            raise UsageError(
                f"{path}: a run writes this file ({who}); store the projection once it ended"
            ) from None
        os.ftruncate(fd, 0)
        holder = f"scalebench project --store on {socket.gethostname()} pid {os.getpid()}\n"
        os.write(fd, holder.encode())
        yield
    finally:
        if created and os.path.exists(lock_path):
            os.unlink(lock_path)
        os.close(fd)


def _fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def store(path: str, document: dict, attributes: dict) -> str:
    """Appends `document` (JSON-serialisable) with `attributes` (strings or numbers) as
    `/projections/<k>` of the results file at `path`, durably (Note [Stored projections]).
    Returns the group's name. UsageError while a run holds the file; ResultsFileError when
    it cannot be written."""
    with _run_lock(path):
        directory = os.path.dirname(os.path.abspath(path))
        temporary = f"{os.path.abspath(path)}.tmp-{os.getpid()}"
        try:
            shutil.copy2(path, temporary)
            with h5py.File(temporary, "a") as f:
                group = f.require_group(GROUP)
                name = str(len(group))
                stored = group.create_group(name)
                stored.create_dataset(DOCUMENT, data=json.dumps(document))
                stored.attrs["stored_version"] = STORED_VERSION
                stored.attrs["created_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                stored.attrs["tool"] = f"scalebench_analysis {_version()}"
                for key, value in attributes.items():
                    stored.attrs[key] = value
            _fsync_path(temporary)
            os.replace(temporary, path)
            _fsync_path(directory, directory=True)
        except OSError as error:
            raise ResultsFileError(f"{path}: cannot store the projection: {error}") from None
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return f"/{GROUP}/{name}"


def stored(path: str) -> list[dict]:
    """Every projection stored in the results file at `path`, oldest first: each its
    document with `name` and the group's attributes added. Empty when none."""
    try:
        with h5py.File(path, "r") as f:
            if GROUP not in f:
                return []
            out = []
            for name in sorted(f[GROUP], key=int):
                group = f[GROUP][name]
                raw = group[DOCUMENT][()]
                document = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
                document["name"] = f"/{GROUP}/{name}"
                document["stored"] = {
                    key: (value.decode() if isinstance(value, bytes) else value)
                    for key, value in group.attrs.items()
                }
                out.append(document)
            return out
    except (OSError, KeyError, ValueError) as error:
        raise ResultsFileError(f"{path}: cannot read its stored projections: {error}") from None
