"""The `project` subcommand: its options and its run (docs/projection.md)."""

from __future__ import annotations

import argparse
import sys

from ..arguments import positive_int
from ..output.fit import console_width
from .model import ProjectionOptions
from .project import project
from .render import TABLES, render

FORMATS = ("table", "csv", "json")


def worker_list(text: str) -> tuple:
    """'4,8,64' -> (4, 8, 64); every count an integer >= 1."""
    try:
        counts = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of worker counts like 4,8,64"
        ) from None
    if not counts:
        raise argparse.ArgumentTypeError("needs at least one worker count, e.g. 4,8,64")
    bad = [c for c in counts if c < 1]
    if bad:
        raise argparse.ArgumentTypeError(f"worker counts must be >= 1, got {bad} in {text!r}")
    return counts


def add_parser(sub) -> None:
    """The `project` subcommand."""
    p = sub.add_parser(
        "project",
        help="predict the step at more workers and nodes than were measured (docs/projection.md)",
    )
    p.add_argument("results", help="results .h5 file of `scalebench run`")
    p.add_argument(
        "--workers",
        type=worker_list,
        required=True,
        metavar="N,N,...",
        help="worker counts to project to, e.g. 4,8,64",
    )
    p.add_argument(
        "--probe",
        action="append",
        default=[],
        metavar="PROBE.h5",
        help="a `scalebench probe -o` file: the allreduce cost per message size (repeat for "
        "one on one node and one across nodes); without: fitted from the cells' comm_wait",
    )
    p.add_argument(
        "--gpus-per-node",
        type=positive_int,
        default=None,
        metavar="G",
        help="workers per node: counts above G span nodes and use the inter-node link "
        "(default: every worker on one node)",
    )
    p.add_argument(
        "--fit-max-world",
        type=positive_int,
        default=None,
        metavar="W",
        help="use only the cells of at most W workers as inputs (default: every cell)",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--table", choices=TABLES, default=None, help="csv only: which table (default train)"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


def run(args) -> int:
    """`scalebench project`: prints (or writes) the projection; 0, or the CLI's bad-input
    status through the AnalysisError it raises."""
    options = ProjectionOptions(tuple(args.workers), args.gpus_per_node, args.fit_max_world)
    projection = project(args.results, args.probe, options)
    width = console_width(not args.output and sys.stdout.isatty())
    text = render(projection, args.format, args.table, width)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
