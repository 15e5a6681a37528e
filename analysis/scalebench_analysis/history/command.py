"""The `history` subcommand: its options, and the run that prints (or writes) the trend,
the HTML page and the PNGs."""

from __future__ import annotations

import base64
import sys

from ..arguments import fraction
from .lines import history
from .model import EXIT_STEP, FORMATS, METRICS, ORDERS, HistoryOptions
from .render import SPARK, html_page, render, summary_line


def add_parser(sub) -> None:
    """The `history` subcommand."""
    h = sub.add_parser(
        "history",
        help="trend of the same cells across many results files, steps beyond noise flagged",
    )
    h.add_argument(
        "paths",
        nargs="+",
        metavar="DIR_OR_FILE",
        help="results .h5 files, or directories (their *.h5 files, not recursive)",
    )
    h.add_argument("--order", choices=ORDERS, default="date", help="order of points")
    h.add_argument("--metric", choices=METRICS, default="time", help="figure followed")
    h.add_argument(
        "--threshold",
        type=fraction,
        default=HistoryOptions.threshold,
        help="smallest relative change flagged as a step (default 5%%)",
    )
    h.add_argument("--format", choices=FORMATS, default="text", help="output format")
    h.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    h.add_argument("--html", metavar="REPORT.html", help="also write a self-contained HTML page")
    h.add_argument("--plots", metavar="DIR", help="also write one PNG per experiment to DIR")
    h.add_argument(
        "--fail-on-step",
        action="store_true",
        help=f"exit {EXIT_STEP} when a slower step is flagged (for CI)",
    )


def _can_encode(text: str, stream) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def run(args) -> int:
    """`scalebench history`: prints (or writes) the trend, the HTML page and the PNGs;
    EXIT_STEP with --fail-on-step and a slower step, else 0."""
    options = HistoryOptions(order=args.order, metric=args.metric, threshold=args.threshold)
    hist = history(args.paths, options)
    unicode = bool(args.output) or _can_encode(SPARK, sys.stdout)
    text = render(hist, args.format, unicode)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    if args.output or args.format == "json":
        print(summary_line(hist), file=sys.stderr)
    if args.html or args.plots:
        # Imported here, not at the top: matplotlib (plots.py) is imported only by the runs
        # that draw, not by every `history` (nor by `python -m scalebench_analysis` at all).
        from .plots import experiment_pngs, write_pngs

        pngs = experiment_pngs(hist)
        if args.plots:
            written = write_pngs(pngs, args.plots)
            print(f"wrote {len(written)} plots to {args.plots}", file=sys.stderr)
        if args.html:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(html_page(hist, [(name, _b64(png)) for name, png in pngs]))
            print(f"wrote {args.html}", file=sys.stderr)
    failed = args.fail_on_step and hist.count("slower") > 0
    return EXIT_STEP if failed else 0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
