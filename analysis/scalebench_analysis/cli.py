"""Command line: analyze, compare, report, trace, watch, history, project, decide (also reached as
`scalebench <command>`).

Exit statuses follow scalebench's (docs/user-guide.md#exit-status): 0 ok, 1 the regression
gate failed (compare) or a probe file holds a failed check (analyze / report of a
`scalebench probe -o` file), 2 bad input (missing file, not a scalebench file, layout version
mismatch, bad option).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from .arguments import fraction, positive_float
from .errors import AnalysisError, UsageError
from .history import command as history_command
from .output import decide_command, live, ops_render, probe_render, timeline
from .output.fit import console_width, wrap
from .output.render import render
from .projection import command as projection_command
from .read.loader import load
from .tables import compare, probe, program_checks, quality
from .tables.analysis import Analysis, AnalysisOptions, analyze

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
#: A probe file with a WRONG check: the same status as a failed regression gate.
EXIT_PROBE_WRONG = EXIT_REGRESSION
FORMATS = ("table", "csv", "json", "markdown")


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="output format (default: table, for the console)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    parser.add_argument(
        "--table",
        default=None,
        help="csv only: which table to write (default: cells for analyze, regressions for compare)",
    )


def _add_quality(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("trust checks")
    group.add_argument(
        "--max-cv",
        type=fraction,
        default=quality.QualityOptions.max_cv,
        help="cells noisier than this coefficient of variation are untrusted "
        "(default: the file's verdict valid_cv, judged by its "
        "max_valid_cv, 10%% as scalebench writes it); compare weighs such runs against "
        "the change instead of refusing them (docs/measurement.md#judging-a-difference)",
    )
    group.add_argument(
        "--max-drift",
        type=fraction,
        default=quality.QualityOptions.max_drift,
        help="cells whose first-half / second-half median drift exceeds this "
        "are untrusted (default 10%%)",
    )
    group.add_argument(
        "--straggler-threshold",
        type=fraction,
        default=quality.QualityOptions.straggler_threshold,
        help="a rank this much slower than the other ranks' median is a straggler (default 10%%)",
    )


def _add_gate(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("regression test")
    group.add_argument(
        "--threshold",
        type=fraction,
        default=compare.GateOptions.threshold,
        help="smallest change that counts as a regression (default 5%%)",
    )
    group.add_argument(
        "--alpha",
        type=fraction,
        default=compare.GateOptions.alpha,
        help="significance level of the test and the confidence interval (default 0.05)",
    )
    group.add_argument(
        "--correction",
        choices=("none", "holm"),
        default="none",
        help="multiple-testing correction of the p-values across cells",
    )


def _add_baselines(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("baseline")
    group.add_argument(
        "--baseline-branch", metavar="BRANCH", help="speedup of every other branch against this one"
    )
    group.add_argument(
        "--baseline",
        metavar="FIELD=VALUE",
        help="speedup of every setting against cells with this spec value, "
        "e.g. precision=fp32, channels_last=false, optimizer.name=sgd",
    )
    group.add_argument(
        "--baseline-file",
        metavar="BASE.h5",
        help="speedups and the regression test against another results file",
    )
    parser.add_argument(
        "--slo-p99-ms",
        type=positive_float,
        metavar="MS",
        help="latency SLO: report the largest batch whose p99 latency meets it",
    )


def _add_ops_limit(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument(
        "--ops-limit",
        type=int,
        default=default,
        metavar="N",
        help=f"with --ops: operators shown per phase (analyze) or per pair (compare), default "
        f"{default}",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalebench-analysis", description="Analyse scalebench results files."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="tables of one results file (or a probe file)")
    a.add_argument("results", help="results .h5 file, or a `scalebench probe -o` file")
    a.add_argument(
        "--ablation",
        action="store_true",
        help="per-axis and cumulative ablation tables and recommendations (swept settings)",
    )
    a.add_argument(
        "--plots",
        metavar="DIR",
        help="also write every plot of the HTML report as DIR/<plot>.png (DIR is created)",
    )
    a.add_argument(
        "--peak-flops",
        metavar="FILE",
        help='JSON {"devices": {"<device name part>": {"bf16": FLOP/s, ...}}} added to the '
        "shipped peak table of the MFU section (docs/metrics.md#mfu)",
    )
    a.add_argument(
        "--details",
        action="store_true",
        help="table format: print every table (default: the run, the cells, the tables an "
        "option asked for and the summary; the others listed by name)",
    )
    a.add_argument(
        "--summary",
        action="store_true",
        help="table format: print the summary only (the answer: fastest configuration per "
        "experiment, scaling, recommended batch, failures, untrusted cells); `scalebench run` "
        "ends with it",
    )
    a.add_argument(
        "--ops",
        nargs="?",
        const="",
        metavar="CELL",
        help="operator profiles (cells run with profile_steps): the top operators by self time "
        "per phase of every profiled cell, or of those whose id starts with CELL "
        "(docs/profiles.md)",
    )
    _add_ops_limit(a, 10)
    _add_output(a)
    _add_baselines(a)
    _add_quality(a)
    _add_gate(a)
    c = sub.add_parser("compare", help="regression gate: new against base (exit 1 on regression)")
    c.add_argument("base", help="baseline results .h5 file (with --branches: the one file)")
    c.add_argument("new", nargs="?", help="new results .h5 file (not with --branches)")
    c.add_argument(
        "--branches",
        nargs=2,
        metavar=("BASE", "NEW"),
        help="within one file: the cells of branch NEW against those of branch BASE",
    )
    c.add_argument(
        "--ops",
        action="store_true",
        help="per compared pair of profiled cells: the operators added, removed, changed in "
        "count or time, ranked by their share of the step's change (docs/profiles.md); "
        "printed instead of the regression table, the exit status is still the gate's",
    )
    _add_ops_limit(c, 15)
    _add_output(c)
    _add_quality(c)
    _add_gate(c)
    r = sub.add_parser("report", help="self-contained HTML report with plots")
    r.add_argument("results", help="results .h5 file, or a `scalebench probe -o` file")
    r.add_argument("-o", "--output", required=True, metavar="REPORT.html")
    r.add_argument("--title", default=None, help="page title")
    _add_baselines(r)
    _add_quality(r)
    _add_gate(r)
    timeline.add_parser(sub)
    live.add_parser(sub)
    history_command.add_parser(sub)
    projection_command.add_parser(sub)
    decide_command.add_parser(sub)
    return parser


def _options(args) -> AnalysisOptions:
    baseline = None
    if getattr(args, "baseline_branch", None) and getattr(args, "baseline", None):
        raise UsageError("give --baseline-branch or --baseline, not both")
    if getattr(args, "baseline_branch", None):
        baseline = ("branch", args.baseline_branch)
    elif getattr(args, "baseline", None):
        field, sep, value = args.baseline.partition("=")
        if not sep or not field:
            raise UsageError(
                f"--baseline {args.baseline!r}: expected FIELD=VALUE, e.g. precision=fp32"
            )
        baseline = (field.strip(), value.strip())
    return AnalysisOptions(
        quality=quality.QualityOptions(
            max_cv=args.max_cv,
            max_drift=args.max_drift,
            straggler_threshold=args.straggler_threshold,
        )
        if hasattr(args, "max_cv")
        else quality.QualityOptions(),
        slo_p99_ms=getattr(args, "slo_p99_ms", None),
        baseline=baseline,
        baseline_file=getattr(args, "baseline_file", None),
        ablation=getattr(args, "ablation", False) or args.command == "report",
        peak_flops=getattr(args, "peak_flops", None),
        gate=compare.GateOptions(
            threshold=args.threshold,
            alpha=args.alpha,
            correction=args.correction,
        ),
    )


def _width(args) -> int:
    """The console tables' width (output/fit.py Note [Console width]): the terminal's when
    the text goes to one."""
    return console_width(not args.output and sys.stdout.isatty())


def _write(text: str, path: str | None) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _warn_damaged(command: str, *loaded) -> None:
    """One line on stderr per damaged cell of each loaded file (left out of the analysis),
    and one per cell kept with an unreadable part (its accuracy shows as unreadable)."""
    for results in loaded:
        if results is None:
            continue
        for cell_id, problem in sorted(results.damaged.items()):
            print(
                f"scalebench {command}: warning: {results.path}: damaged cell {cell_id} left "
                f"out: {problem}",
                file=sys.stderr,
            )
        for cell_id, problem in sorted(results.problems.items()):
            if problem.startswith(("series", "/series")):  # loader: a damaged /series group
                print(
                    f"scalebench {command}: warning: {results.path}: series {cell_id}: "
                    f"{problem} (its repetitions are shown as cells only)",
                    file=sys.stderr,
                )
                continue
            shown = (
                "its accuracy is shown as unreadable"
                if problem.startswith("accuracy")
                else "its batch search is left out"
            )
            print(
                f"scalebench {command}: warning: {results.path}: cell {cell_id}: {problem} "
                f"({shown})",
                file=sys.stderr,
            )


def _warn_identical_code(command: str, *loaded) -> None:
    """One line on stderr per experiment whose branches ran byte-identical code
    (tables/program_checks.py), over the cells of every loaded file together."""
    frames = [r.cells for r in loaded if r is not None and len(r.cells)]
    if not frames:
        return
    cells = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for line in program_checks.identical_code_warnings(cells):
        print(f"scalebench {command}: warning: {line}", file=sys.stderr)


#: Options of analyze / report that need a results file; refused for a probe file.
_RESULTS_ONLY = {
    "ablation": "--ablation",
    "baseline_branch": "--baseline-branch",
    "baseline": "--baseline",
    "baseline_file": "--baseline-file",
    "slo_p99_ms": "--slo-p99-ms",
    "plots": "--plots",
}


def _refuse_results_options(args) -> None:
    given = [flag for name, flag in _RESULTS_ONLY.items() if getattr(args, name, None)]
    if given:
        raise UsageError(
            f"{', '.join(given)}: only for results files, and {args.results} is a probe file"
        )


def _probe_status(loaded: probe.Probe) -> int:
    return EXIT_PROBE_WRONG if probe.failed_checks(loaded) else EXIT_OK


def run_analyze_probe(args) -> int:
    """analyze of a probe file: the tables per operation and the summary (exit 1 when a
    check failed; the check line also goes to stderr when the output is a file, CSV or JSON)."""
    _refuse_results_options(args)
    loaded = probe.load_probe(args.results)
    _write(probe_render.render_probe(loaded, args.format, args.table), args.output)
    if args.output or args.format in ("csv", "json"):
        print(probe.check_line(loaded), file=sys.stderr)
    return _probe_status(loaded)


def run_analyze(args) -> int:
    if probe.is_probe_file(args.results):
        return run_analyze_probe(args)
    if args.ops is not None:  # docs/profiles.md
        loaded = load(args.results)
        _write(
            ops_render.analyze_ops(
                loaded, args.results, args.ops or None, args.ops_limit, args.format
            ),
            args.output,
        )
        return EXIT_OK
    analysis = analyze(args.results, _options(args))
    _warn_damaged("analyze", analysis.results, analysis.baseline)
    _warn_identical_code("analyze", analysis.results)
    text = render(
        analysis, args.format, args.table or "cells", _width(args), args.details, args.summary
    )
    _write(text, args.output)
    if args.plots:
        # matplotlib is imported by the commands that draw only (plots.py, report.py).
        from .output.plots import write_pngs

        written = write_pngs(analysis, args.plots)
        print(f"wrote {len(written)} plots to {args.plots}", file=sys.stderr)
    return EXIT_OK


def run_compare(args) -> int:
    options = _options(args)
    if args.branches:
        if args.new:
            raise UsageError("--branches compares two branches of one file: give one file")
        loaded = load(args.base)
        _warn_damaged("compare", loaded)
        _warn_identical_code("compare", loaded)
        base, new = (compare.branch_view(loaded, branch) for branch in args.branches)
        table, phases = compare.compare_tables(
            base, new, options.gate, ("commit", "branch"), options.quality
        )
    else:
        if not args.new:
            raise UsageError("compare needs two files (base new), or one with --branches B N")
        base, new = load(args.base), load(args.new)
        _warn_damaged("compare", base, new)
        _warn_identical_code("compare", base, new)
        table, phases = compare.compare_tables(
            base, new, options.gate, quality_options=options.quality
        )
    if args.ops:  # docs/profiles.md: the operators of each compared pair
        new_path = args.base if args.branches else args.new
        text = ops_render.compare_ops(
            base, args.base, new, new_path, table, args.ops_limit, args.format
        )
        _write(text, args.output)
        return EXIT_REGRESSION if compare.gate_failed(table) else EXIT_OK
    sections = {"regressions": table, "phases": phases}
    analysis = Analysis(results=new, options=options, sections=sections)
    text = render(analysis, args.format, args.table or "regressions", _width(args))
    summary = compare.gate_summary(table, options.gate)
    if args.format in ("table", "markdown"):
        shown = "\n".join(wrap(summary, _width(args), "  ")) if args.format == "table" else summary
        text = text.rstrip("\n") + "\n\n" + shown + "\n"
    _write(text, args.output)
    if args.output or args.format in ("csv", "json"):
        print(summary, file=sys.stderr)
    return EXIT_REGRESSION if compare.gate_failed(table) else EXIT_OK


def run_report(args) -> int:
    from .output.report import write_report  # matplotlib: see run_analyze
    from .projection.report_section import projection_section

    if probe.is_probe_file(args.results):
        _refuse_results_options(args)
        loaded = probe.load_probe(args.results)
        _write(probe_render.probe_html(loaded, args.title), args.output)
        print(f"wrote {args.output}", file=sys.stderr)
        print(probe.check_line(loaded), file=sys.stderr)
        return _probe_status(loaded)
    analysis = analyze(args.results, _options(args))
    _warn_damaged("report", analysis.results, analysis.baseline)
    section = projection_section(analysis)  # issue 51: None without a trained cell
    write_report(analysis, args.output, title=args.title, projection=section)
    print(f"wrote {args.output}", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {
        "analyze": run_analyze,
        "compare": run_compare,
        "report": run_report,
        "trace": timeline.run,
        "watch": live.run,
        "history": history_command.run,
        "project": projection_command.run,
        "decide": decide_command.run,
    }
    try:
        return handlers[args.command](args)
    except AnalysisError as error:
        print(f"scalebench {args.command}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"scalebench {args.command}: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
