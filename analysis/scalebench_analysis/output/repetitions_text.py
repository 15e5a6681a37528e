"""The Repetitions table as text (Note [Repetitions]): the console, Markdown and HTML
renderings of tables/repetitions.py's table (its figures each with their 95 % interval, the
notes on series whose repetitions disagree or did not complete, the Markdown executive
summary). Output only: the figures are the file's (tables/repetitions.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _finite(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def interval_text(value, low, high, fmt: str = "{:,.3f}", unit: str = "") -> str:
    """ "19.172 [19.006, 22.359] ms": a figure with its interval ("-" without the figure,
    the figure alone without an interval)."""
    if not _finite(value):
        return "-"
    text = fmt.format(value)
    if _finite(low) and _finite(high):
        text += f" [{fmt.format(low)}, {fmt.format(high)}]"
    return text + (f" {unit}" if unit else "")


def display_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The Repetitions table as text for the console, Markdown and HTML: label, reps,
    median (ms) and throughput each with its 95 % interval, spread, DISAGREE."""
    return pd.DataFrame(
        {
            "label": frame.label,
            "reps": frame.reps,
            "median ms [95% CI]": [
                interval_text(m, lo, hi)
                for m, lo, hi in zip(frame.median_ms, frame.ci_low_ms, frame.ci_high_ms)
            ],
            "samples/s [95% CI]": [
                interval_text(t, lo, hi, "{:,.1f}")
                for t, lo, hi in zip(
                    frame.throughput_samples_per_s,
                    frame.throughput_ci_low,
                    frame.throughput_ci_high,
                )
            ],
            "spread": [f"{s:.1f}%" if _finite(s) else "-" for s in frame.spread_pct],
            "agree": ["DISAGREE" if d else "yes" for d in frame.disagree],
        },
        index=range(len(frame)),
    )


def _ms_list(values) -> str:
    return ", ".join("-" if not _finite(v) else f"{v:.3f}" for v in values)


def notes(frame: pd.DataFrame) -> list[str]:
    """One line per series whose repetitions disagree (their medians listed) and per series
    with repetitions that did not complete."""
    lines = []
    for r in frame.itertuples():
        if r.disagree:
            lines.append(
                f"DISAGREE: {r.label}: the repetitions' medians span {r.spread_pct:.1f}% of "
                f"their median (more than 10%): {_ms_list(r.repetition_median_ms)} ms; the "
                f"machine changed during the run, and the interval understates the "
                f"uncertainty (docs/repetitions.md)"
            )
        if r.completed < r.repetitions:
            lines.append(
                f"{r.label}: {r.completed} of {r.repetitions} repetitions completed"
                + ("" if r.completed >= 2 else ": no interval (it needs two)")
            )
    return lines


def executive_summary(frame: pd.DataFrame) -> str:
    """Markdown bullets, one per series: the median and the throughput with their 95 %
    intervals, the repetitions completed, and DISAGREE with the spread."""
    lines = []
    for r in frame.itertuples():
        what = "step" if r.metric == "step" else "batch"
        line = (
            f"* **{r.label}**: median {what} time "
            f"{interval_text(r.median_ms, r.ci_low_ms, r.ci_high_ms, unit='ms')}, throughput "
            + interval_text(
                r.throughput_samples_per_s,
                r.throughput_ci_low,
                r.throughput_ci_high,
                "{:,.1f}",
                "samples/s",
            )
            + f" (95% bootstrap intervals over {r.reps} repetitions)"
        )
        if r.disagree:
            line += f"; **DISAGREE**: the repetitions span {r.spread_pct:.1f}% (> 10%)"
        lines.append(line + ".")
    return "\n".join(lines) + "\n" if lines else ""
