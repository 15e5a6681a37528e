"""Every `scalebench ...` command shown in a fenced shell or console block of README.md and
docs/*.md is one the tool accepts (issue 54 row 10): an analysis command parses with the
analysis package's own parser (values included: `--max-cv 1` is refused as the CLI refuses
it), and each long option of a command of the C++ executable is one its `--help` lists. Nothing
is run: file names such as results.h5 or <matrix> are placeholders, only the options count.
Usage lines are read as commands (`[--format table|json]` is `--format table`)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scalebench_analysis.cli import build_parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))
import doc_blocks  # noqa: E402

COMMANDS = doc_blocks.commands()
LONG_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
#: A usage line's stand-in for a value: `N`, `FRACTION`, `FIELD=VALUE`, `N,N,...`, `<matrix>`.
PLACEHOLDER = re.compile(r"^(<.*>|(?=.*[A-Z])[^a-z]*)$")


def _scalebench() -> Path:
    build = os.environ.get("SCALEBENCH_BUILD_DIR", str(doc_blocks.ROOT / "build" / "release"))
    return Path(build) / "bin" / "scalebench"


@functools.cache
def _cpp_options(subcommand: str) -> frozenset[str]:
    """The long options `scalebench SUBCOMMAND --help` lists."""
    done = subprocess.run(
        [str(_scalebench()), subcommand, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"scalebench {subcommand} --help: {done.stdout}{done.stderr}"
    return frozenset(LONG_OPTION.findall(done.stdout))


def test_the_docs_show_commands_of_every_kind():
    """The extraction finds the documented commands (a change of the docs' markup that hid
    them would make the tests below vacuous)."""
    kinds = {command.argv[0] for command in COMMANDS}
    assert {"analyze", "compare", "report", "run", "validate", "info"} <= kinds, kinds
    assert len(COMMANDS) > 40, len(COMMANDS)


def _with_values(argv: tuple[str, ...]) -> list[str]:
    """ARGV with each placeholder value of an option replaced by a value of its type (its
    first choice, its default, 1 or 0.5): a usage line's `--ops-limit N` is checked as
    `--ops-limit 10`."""
    sub = build_parser()._subparsers._group_actions[0].choices[argv[0]]
    actions = {name: action for action in sub._actions for name in action.option_strings}
    out = list(argv)
    for index in range(1, len(out)):
        action = actions.get(out[index - 1])
        if action is None or action.nargs == 0 or not PLACEHOLDER.match(out[index]):
            continue
        if action.choices:
            out[index] = str(next(iter(action.choices)))
        elif action.type is not None:
            out[index] = next(v for v in (str(action.default), "1", "0.5") if _accepts(action, v))
    return out


def _accepts(action, value: str) -> bool:
    try:
        action.type(value)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return False
    return True


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_documented_command_is_accepted(command):
    subcommand = command.argv[0]
    known = doc_blocks.ANALYSIS_COMMANDS + doc_blocks.CPP_COMMANDS
    assert subcommand in known, f"{command.where}: `{command.text}`: no subcommand {subcommand}"
    if subcommand in doc_blocks.ANALYSIS_COMMANDS:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                build_parser().parse_args(_with_values(command.argv))
            except SystemExit as stop:
                pytest.fail(
                    f"{command.where}: `{command.text}` is refused (exit {stop.code}): "
                    f"{err.getvalue().strip().splitlines()[-1]}"
                )
        return
    if not _scalebench().is_file():
        pytest.skip(f"no {_scalebench()} to ask for `{subcommand} --help` (build it first)")
    documented = set(LONG_OPTION.findall(" ".join(command.argv[1:])))
    unknown = sorted(documented - _cpp_options(subcommand))
    assert not unknown, (
        f"{command.where}: `{command.text}`: `scalebench {subcommand} --help` lists no {unknown}"
    )


def _analysis_actions() -> dict[str, dict]:
    """subcommand -> option string -> its argparse action."""
    choices = build_parser()._subparsers._group_actions[0].choices
    return {
        name: {option: action for action in sub._actions for option in action.option_strings}
        for name, sub in choices.items()
    }


INLINE = doc_blocks.inline_spans()
INLINE_COMMANDS = [span for span in INLINE if span.argv[0]]
INLINE_VALUES = [span for span in INLINE if not span.argv[0]]


@pytest.mark.parametrize("span", INLINE_COMMANDS, ids=lambda c: c.where)
def test_inline_command_names_options_the_tool_has(span):
    """`scalebench compare ... --ops` in the prose: the subcommand exists and has each long
    option named (the rest of such a span is often elided)."""
    subcommand, words = span.argv[0], span.argv[1:]
    options = set(LONG_OPTION.findall(" ".join(words)))
    if subcommand in doc_blocks.ANALYSIS_COMMANDS:
        known = set(_analysis_actions()[subcommand])
    elif subcommand in doc_blocks.CPP_COMMANDS:
        if not _scalebench().is_file():
            pytest.skip(f"no {_scalebench()} to ask for `{subcommand} --help` (build it first)")
        known = _cpp_options(subcommand)
    else:
        pytest.fail(f"{span.where}: `{span.text}`: scalebench has no subcommand {subcommand}")
    assert options <= known, f"{span.where}: `{span.text}`: {subcommand} has no {options - known}"


@pytest.mark.parametrize("span", INLINE_VALUES, ids=lambda c: c.where)
def test_inline_option_value_is_accepted(span):
    """`--max-cv 100%` in the prose: a value of a typed option of analyze / compare / report
    (a number, a fraction) is one the option accepts; `--max-cv 1` is refused as ambiguous,
    so the docs must not show it. (Options of the other commands are left alone: a lone
    `--gpus-per-node 0` may be `submit`'s.)"""
    _, option, value = span.argv
    typed = [
        actions[option]
        for name, actions in _analysis_actions().items()
        if name in ("analyze", "compare", "report")
        if option in actions and actions[option].type is not None and not actions[option].choices
    ]
    if not typed or PLACEHOLDER.match(value):
        return  # not an analysis option with a typed value, or a stand-in
    assert any(_accepts(action, value) for action in typed), (
        f"{span.where}: `{span.text}`: scalebench refuses {option} {value}"
    )
