"""The `decide` subcommand: a look of `repetitions: auto` (tables/decide.py, Note [Deciding a
series]; docs/repetitions.md#repetitions-auto). The orchestrator runs it before each round
r >= 3 (Note [Adaptive repetitions] in orchestrator/adaptive_rounds.h) and reads stdout.

Contract with the orchestrator: with `--format json`, stdout is exactly one JSON object,
{"undecided": [series id, ...], "summary": "<one line>"}, and the exit status is 0; a file
that cannot be read is an error on stderr with exit status 2 (cli.py: the orchestrator then
runs the round anyway, with a warning). `--format table` prints one line per series for a
person.
"""

from __future__ import annotations

import json
import sys

from ..arguments import fraction, positive_int
from ..read.loader import load
from ..tables.decide import DecideOptions, look_at, look_json


def add_parser(sub) -> None:
    """The `decide` subcommand."""
    d = sub.add_parser(
        "decide",
        help="repetitions: auto: the series still undecided after LOOK runs "
        "(docs/repetitions.md#repetitions-auto)",
    )
    d.add_argument("results", help="results .h5 file of a running `scalebench run`")
    d.add_argument(
        "--look",
        type=positive_int,
        required=True,
        metavar="R",
        help="judge the runs of rounds 0 .. R-1 (the look before round R)",
    )
    d.add_argument("--format", choices=("json", "table"), default="table")
    d.add_argument(
        "--threshold",
        type=fraction,
        default=DecideOptions.threshold,
        help="smallest change that counts (default 5%%, as compare's)",
    )
    d.add_argument(
        "--alpha",
        type=fraction,
        default=DecideOptions.alpha,
        help="A/A false-verdict rate over all the looks (default 0.05)",
    )


def run(args) -> int:
    options = DecideOptions(threshold=args.threshold, alpha=args.alpha)
    looked = look_at(load(args.results), args.look, options)
    answer = look_json(looked, args.look, options)
    if args.format == "json":
        sys.stdout.write(json.dumps(answer) + "\n")
        return 0
    for one in looked:
        state = "decided  " if one.decided else "undecided"
        print(f"{state} {one.series_id} {one.label} ({one.runs} ok runs): {'; '.join(one.why)}")
    print(answer["summary"])
    return 0
