"""The commands and the console outputs shown in the documentation (README.md, docs/*.md), read
the same way by the tests that keep them true (tests/analysis/test_docs_commands.py,
test_docs_outputs.py) and by the script that regenerates the outputs
(tests/docs/regenerate_outputs.py).

Note [Documented outputs]
A console block that shows what a command printed is marked by an HTML comment right above its
fence (invisible on a rendered page):

    <!-- output
    command: scalebench compare runs/program_demo/results.h5 --branches main batched-transform
    run: docs/examples/programs/run_demo.sh
    sections: Regression gate
    shape: compare {synthetic} --branches main feature
    -->

* `command` (required): what produced the block, as a user types it; `scalebench <analysis
  command>` runs as `python -m scalebench_analysis <command>` (the same program).
* `run`: the script whose real run writes the file the command reads (`synthetic`: the file
  of tests/analysis/make_results.py, written to `{synthetic}`); regenerate_outputs.py runs each
  such script once, then every command that needs it, and rewrites the blocks.
* `sections`: only these `== Title ==` sections of the output, comma-separated (a block that
  shows part of a long output); `columns`: the console width (default 100).
* `shape`: the analysis command (without `scalebench`) that test_docs_outputs.py runs on the
  synthetic file to check that every section title and column name the block shows is still
  one the tool prints; without it the block is only regenerated.
The test cannot check numbers (they are a machine's), only the format; the script is what
keeps the numbers real.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
#: Fenced blocks in these languages hold no command lines.
NOT_COMMANDS = {"yaml", "yml", "python", "py", "json", "cpp", "c++", "toml", "ini", "csv"}
#: The subcommands of the analysis package (analysis/scalebench_analysis/cli.py): `scalebench
#: <one of these>` runs `python -m scalebench_analysis <it>`.
ANALYSIS_COMMANDS = (
    "analyze",
    "compare",
    "report",
    "trace",
    "watch",
    "history",
    "project",
    "decide",
)
#: The subcommands of the C++ executable (app/main.cc).
CPP_COMMANDS = ("validate", "plan", "run", "info", "submit", "probe", "selftest", "schema")
LAUNCHERS = ("mpirun", "mpiexec", "srun")
SECTION = re.compile(r"^== (.+?) ==\s*$")


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


@dataclasses.dataclass(frozen=True)
class Command:
    """One documented invocation: where it is written and scalebench's argument vector (the
    subcommand first), with synopsis brackets resolved (`[--format table|json]` -> `--format
    table`)."""

    path: Path
    line: int
    text: str
    argv: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclasses.dataclass
class Block:
    """A fenced block: its language, the index of its first content line and its lines."""

    language: str
    first: int
    lines: list[str]


def fenced_blocks(lines: list[str]) -> list[Block]:
    blocks, open_block, fence = [], None, ""
    for index, line in enumerate(lines):
        match = FENCE.match(line)
        if open_block is None and match:
            open_block, fence = Block(match.group(3).lower(), index + 1, []), match.group(2)
        elif (
            open_block is not None
            and line.strip().startswith(fence[:3])
            and not line.strip("`~ \t")
        ):
            blocks.append(open_block)
            open_block = None
        elif open_block is not None:
            open_block.lines.append(line)
    return blocks


def _logical_lines(block: Block):
    """(line number, text) of the block's commands: `\\` continuations joined, and so are the
    indented `[...]` lines that continue a usage line."""
    logical: list[list] = []
    pending = False
    for offset, line in enumerate(block.lines):
        continues = pending or (logical and re.match(r"^\s+\[", line))
        if continues:
            logical[-1][1] += " " + line.strip()
        else:
            logical.append([block.first + offset + 1, line])
        pending = line.rstrip().endswith("\\")
        if pending:
            logical[-1][1] = logical[-1][1].rstrip()[:-1]
    return [(number, text) for number, text in logical]


def _synopsis(tokens: list[str]) -> list[str]:
    """A usage line as an argument vector: `[--opt VALUE]` keeps its content, a bracket of
    words that are no option goes (`[same options]`, `[CELL]`), of alternatives (`[--details |
    --summary]`, `table|csv`) the first stays, `FILE...` is FILE and a `...` value is the
    placeholder `<...>`."""
    out, depth, dropped = [], 0, False
    for token in tokens:
        opening = len(token) - len(token.lstrip("["))
        word = token.strip("[]")
        if opening:
            depth += opening
            dropped = not word.startswith("-")
        if word == "|" and depth:
            dropped = True
        elif word and not (depth and dropped):
            word = "<...>" if word == "..." else word.removesuffix("...")
            if "|" in word and not word.startswith("|"):
                word = word.split("|")[0]
            out.append(word)
        depth = max(depth - (len(token) - len(token.rstrip("]"))), 0)
        if not depth:
            dropped = False
    return out


def _scalebench_argv(tokens: list[str]) -> list[str] | None:
    """scalebench's arguments in a command line, or None when the line runs something else."""
    while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
        tokens = tokens[1:]  # VAR=value prefixes
    if not tokens:
        return None
    head = tokens[0]
    if Path(head).name in LAUNCHERS:
        for index, token in enumerate(tokens):
            if Path(token).name == "scalebench":
                return tokens[index + 1 :]
        return None
    if Path(head).name == "scalebench":
        return tokens[1:]
    if re.match(r"^(\S*/)?python[0-9.]*$", head) and tokens[1:3] == ["-m", "scalebench_analysis"]:
        return tokens[3:]
    return None


def commands(root: Path = ROOT) -> list[Command]:
    """Every `scalebench ...` line of the fenced shell / console blocks of the docs (`$ ` prompts
    and `# comments` removed). A line whose subcommand is not a plain word (`scalebench probe:
    2 worker ranks`, an output line) is not a command."""
    found = []
    for path in doc_files(root):
        for block in fenced_blocks(path.read_text().splitlines()):
            if block.language in NOT_COMMANDS:
                continue
            for number, text in _logical_lines(block):
                stripped = text.strip().removeprefix("$ ")
                try:
                    tokens = shlex.split(stripped, comments=True)
                except ValueError:
                    continue
                argv = _scalebench_argv(tokens)
                if not argv or not re.fullmatch(r"[a-z]+", argv[0]):
                    continue
                found.append(Command(path, number, stripped, tuple(_synopsis(argv))))
    return found


@dataclasses.dataclass
class Output:
    """A marked output block (Note [Documented outputs])."""

    path: Path
    marker_line: int
    block: Block
    fields: dict

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.marker_line}"

    @property
    def sections(self) -> list[str]:
        return [s.strip() for s in self.fields.get("sections", "").split(",") if s.strip()]


MARKER = re.compile(r"<!--\s*output\b(.*?)-->", re.DOTALL)


def outputs(root: Path = ROOT) -> list[Output]:
    """Every marked output block of the docs; a marker not followed by a fence is an error."""
    found = []
    for path in doc_files(root):
        text = path.read_text()
        lines = text.splitlines()
        blocks = {block.first - 1: block for block in fenced_blocks(lines)}
        for match in MARKER.finditer(text):
            end_line = text.count("\n", 0, match.end())
            fence = end_line + 1
            while fence < len(lines) and not lines[fence].strip():
                fence += 1
            fields = {}
            for line in match.group(1).strip().splitlines():
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
            marker_line = text.count("\n", 0, match.start()) + 1
            if fence not in blocks or "command" not in fields:
                raise ValueError(
                    f"{path}:{marker_line}: an output marker needs a `command:` line and a "
                    "fenced block right below it (tests/docs/doc_blocks.py)"
                )
            found.append(Output(path, marker_line, blocks[fence], fields))
    return found


def split_sections(text: str) -> dict[str, list[str]]:
    """Output lines by `== Title ==` section ('' for the lines before the first title). A title
    wrapped for width (`== Phases that changed ... the same` + `   test) ==`) is one title,
    its lines joined by one space."""
    sections, title, opening = {"": []}, "", None
    for line in text.splitlines():
        if opening is not None:
            opening += " " + line.strip()
            if line.rstrip().endswith(" =="):
                title, opening = opening[3:-3].strip(), None
                sections[title] = []
        elif line.startswith("== ") and not line.rstrip().endswith(" =="):
            opening = line.rstrip()
        elif SECTION.match(line):
            title = SECTION.match(line).group(1)
            sections[title] = []
        else:
            sections[title].append(line)
    return sections


def select_sections(text: str, titles: list[str]) -> str:
    """The sections of an output whose title starts with one of TITLES, in the output's order
    (all of it without titles); a title keeps the lines it was printed on."""
    if not titles:
        return text.rstrip("\n")
    kept, current, keep = [], [], False
    for line in text.splitlines():
        starts = line.startswith("== ")
        if starts:
            if keep:
                kept.append(current)
            current = []
            keep = any(line[3:].startswith(title) for title in titles)
        current.append(line)
    if keep:
        kept.append(current)
    blocks = []
    for lines in kept:
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def replace_block(path: Path, output: Output, new_lines: list[str]) -> None:
    """Rewrites the block's content lines in PATH (the fences stay)."""
    lines = path.read_text().splitlines(keepends=True)
    start = output.block.first
    end = start + len(output.block.lines)
    lines[start:end] = [line + "\n" for line in new_lines]
    path.write_text("".join(lines))


def analysis_argv(command: str) -> list[str] | None:
    """`scalebench <analysis command> ...` as the analysis package's arguments, else None."""
    argv = _scalebench_argv(shlex.split(command))
    if argv and argv[0] in ANALYSIS_COMMANDS:
        return argv
    return None


INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def inline_spans(root: Path = ROOT) -> list[Command]:
    """The inline code spans of the docs' prose that are a scalebench command (`scalebench
    compare ... --ops`) or one option with its value (`--max-cv 100%`): argv is the subcommand
    and its words for the first, ('', option, value) for the second."""
    found = []
    for path in doc_files(root):
        lines = path.read_text().splitlines()
        inside = set()
        for block in fenced_blocks(lines):
            inside.update(range(block.first - 1, block.first + len(block.lines) + 1))
        for index, line in enumerate(lines):
            if index in inside:
                continue
            for match in INLINE.finditer(line):
                text = match.group(1).replace("\\|", "|")
                try:
                    tokens = shlex.split(text)
                except ValueError:
                    continue
                argv = _scalebench_argv(tokens)
                if argv and re.fullmatch(r"[a-z]+", argv[0]):
                    found.append(Command(path, index + 1, text, tuple(_synopsis(argv))))
                elif len(tokens) == 2 and re.fullmatch(r"--[a-z][a-z0-9-]*", tokens[0]):
                    found.append(Command(path, index + 1, text, ("", *tokens)))
    return found
