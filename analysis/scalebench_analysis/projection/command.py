"""The `project` subcommand: its options and its run (docs/projection.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..arguments import positive_int
from ..errors import UsageError
from ..output.fit import console_width
from ..tables.probe import load_probe
from .against import against
from .comm import fit_probe
from .model import ProjectionOptions
from .project import project
from .render import TABLES, render, render_against, to_document
from .store import store

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
        default=None,
        metavar="N,N,...",
        help="worker counts to project to, e.g. 4,8,64 (required unless --against)",
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
    p.add_argument(
        "--store",
        action="store_true",
        help="also store the projection and its inputs in the results file "
        "(/projections/<k>, docs/results-file.md#projections)",
    )
    p.add_argument(
        "--against",
        metavar="STORED.h5",
        help="instead of projecting: compare the projection stored in STORED.h5 (--store) "
        "with the cells the results file measured",
    )
    p.add_argument(
        "--stored",
        type=int,
        default=None,
        metavar="K",
        help="with --against: the stored projection /projections/K (default: the last)",
    )
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--table", choices=TABLES, default=None, help="csv only: which table (default train)"
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")


def _store_attributes(args) -> dict:
    probes = [
        {"path": os.path.abspath(p), "fit": fit_probe(load_probe(p)).describe()} for p in args.probe
    ]
    return {
        "command": " ".join(sys.argv[1:]) or "project",
        "options": json.dumps(
            {
                "workers": list(args.workers),
                "gpus_per_node": args.gpus_per_node,
                "fit_max_world": args.fit_max_world,
            }
        ),
        "probes": json.dumps(probes),
    }


def run(args) -> int:
    """`scalebench project`: prints (or writes) the projection, or with --against a stored
    one against a later run; 0, or the CLI's bad-input status through the AnalysisError it
    raises."""
    width = console_width(not args.output and sys.stdout.isatty())
    if args.against:
        if args.store or args.workers:
            raise UsageError("--against compares a stored projection: drop --workers and --store")
        text = render_against(against(args.results, args.against, args.stored), args.format, width)
    else:
        if not args.workers:
            raise UsageError("--workers N,N,... is required (or --against STORED.h5)")
        options = ProjectionOptions(tuple(args.workers), args.gpus_per_node, args.fit_max_world)
        projection = project(args.results, args.probe, options)
        text = render(projection, args.format, args.table, width)
        if args.store:
            name = store(args.results, to_document(projection), _store_attributes(args))
            print(f"stored the projection as {name} of {args.results}", file=sys.stderr)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
