"""Regenerates the console outputs shown in the docs from real runs (Note [Documented outputs]
in tests/docs/doc_blocks.py): runs each marked block's `run:` script once (a real sweep under
mpirun: the quickstart, the program-cells demo), then each block's `command:`, and rewrites the
block with what it printed. A block it cannot regenerate here (no scalebench executable, the
run failed, the command printed nothing) is named with the reason and left as it is; the exit
status is 1 then.

Usage: .venv/bin/python tests/docs/regenerate_outputs.py [--build build/release]
           [--python .venv/bin/python] [--check] [--reuse] [DOC.md ...]
--check rewrites nothing and exits 1 when a block differs from what its command prints now;
--reuse runs no script and reads the results files an earlier run of them left.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import doc_blocks  # noqa: E402  (after the path)

ROOT = doc_blocks.ROOT
DEFAULT_COLUMNS = 100


def _runs(outputs, build: Path, python: str, work: Path, reuse: bool) -> dict[str, str | None]:
    """run -> None when it is ready, else why not."""
    ready: dict[str, str | None] = {}
    for run in sorted({o.fields.get("run", "") for o in outputs} - {""}):
        if run == "synthetic":
            sys.path.insert(0, str(ROOT / "tests" / "analysis"))
            import make_results

            make_results.write_results(work / "synthetic.h5", repetitions=True)
            ready[run] = None
            continue
        if reuse:
            ready[run] = None  # a command whose file is missing says so below
            continue
        if not (build / "bin" / "scalebench").is_file():
            ready[run] = f"no {build}/bin/scalebench (build it first: ./setup.sh)"
            continue
        print(f"running {run} (a real sweep; a minute or two)", flush=True)
        env = dict(os.environ, SCALEBENCH_RUN_SUMMARY="0")
        done = subprocess.run(
            ["bash", str(ROOT / run), str(build), python],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        log = work / (Path(run).stem + ".log")
        log.write_text(done.stdout + done.stderr)
        # The demo scripts exit non-zero when a gate they print fails: the file is still real.
        ready[run] = (
            None if done.returncode in (0, 1) else f"{run} exited {done.returncode} ({log})"
        )
    return ready


def _command(output, build: Path, python: str, work: Path) -> list[str]:
    text = output.fields["command"].replace("{synthetic}", str(work / "synthetic.h5"))
    argv = doc_blocks.analysis_argv(text)
    if argv is not None:
        return [python, "-m", "scalebench_analysis", *argv]
    words = shlex.split(text)
    return [str(build / "bin" / "scalebench"), *words[1:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="*", help="only the blocks of these files")
    parser.add_argument("--build", default=str(ROOT / "build" / "release"))
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 on a diff")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="run no script: read the files an earlier run of them left (runs/...)",
    )
    args = parser.parse_args()
    build = Path(args.build).resolve()
    only = {Path(d).resolve() for d in args.docs}

    def marked():
        return [o for o in doc_blocks.outputs() if not only or o.path.resolve() in only]

    failed = 0
    with tempfile.TemporaryDirectory(prefix="scalebench-doc-outputs-") as tmp:
        work = Path(tmp)
        ready = _runs(marked(), build, args.python, work, args.reuse)
        # Read again: the docs may have been edited during the runs (minutes).
        outputs = marked()
        # Bottom-up in each file, so that a rewritten block does not move the ones above it.
        for output in sorted(outputs, key=lambda o: (str(o.path), -o.block.first)):
            why = ready.get(output.fields.get("run", ""))
            if why:
                print(f"NOT regenerated {output.where}: {why}")
                failed += 1
                continue
            env = dict(os.environ, COLUMNS=output.fields.get("columns", str(DEFAULT_COLUMNS)))
            done = subprocess.run(
                _command(output, build, args.python, work),
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            text = doc_blocks.select_sections(done.stdout, output.sections)
            if not text.strip():
                print(
                    f"NOT regenerated {output.where}: `{output.fields['command']}` printed "
                    f"nothing{' of ' + ', '.join(output.sections) if output.sections else ''} "
                    f"(exit {done.returncode}): {done.stderr.strip()[-300:]}"
                )
                failed += 1
                continue
            new = text.splitlines()
            if new == output.block.lines:
                print(f"unchanged {output.where}")
            elif args.check:
                print(f"DIFFERS {output.where}: rerun without --check to rewrite it")
                failed += 1
            else:
                doc_blocks.replace_block(output.path, output, new)
                print(f"regenerated {output.where} ({len(new)} lines)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
