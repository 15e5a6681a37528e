"""The data model of `scalebench history` (lines.py's module doc defines it): the options,
the files read (RunFile), a line's points and flagged steps (Point, Step, Line), the History
every renderer takes, and the key that lines cells up across files."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..read.keys import config_key
from ..read.loader import Results

#: Spec fields left out of a line's key (besides `cell_id` and `source`, which
#: read.keys.config_key always drops): what changes along a history or is bookkeeping.
HISTORY_DROP = (
    "commit",
    "repetition",
    "repetitions",
    "seed",
    "timeout_s",
    "interleave",
    "label_settings",
)
ORDERS = ("date", "commit", "file")
METRICS = ("time", "throughput")
FORMATS = ("text", "markdown", "json")
#: Exit status of `--fail-on-step` with a flagged slower step (compare's regression status).
EXIT_STEP = 1
#: Bootstrap draws of the interval of a median over repetition cells without a /series
#: (as many as scalebench's own series bootstrap).
REPETITION_RESAMPLES = 10000


@dataclass(frozen=True)
class HistoryOptions:
    """How points are ordered, which figure is followed and what counts as a step."""

    order: str = "date"
    metric: str = "time"
    threshold: float = 0.05
    resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95


@dataclass
class RunFile:
    """One usable results file: its position among the files given, its contents and its
    `/series` groups (series id -> attributes)."""

    index: int
    path: str
    results: Results
    series: dict


@dataclass
class Point:
    """One file's figure of a line, with its interval (NaN bounds when none)."""

    label: str
    file: str
    index: int
    cell_ids: list
    commit: str
    commit_date: str
    start_time: str
    when: str
    order_key: tuple
    value: float
    ci_low: float
    ci_high: float
    interval: str
    repetitions: int
    disagree: bool
    #: The figure of each run (repetition) the point pools: what steps are judged on.
    runs: tuple = ()


@dataclass
class Step:
    """A change beyond noise between points `before` and `after` (indices into the line):
    `change` of the points' figures, `direction` slower / faster, and the judgement over
    their runs (tables/verdict.py): the ratio after / before with its interval, p."""

    before: int
    after: int
    change: float
    direction: str
    ratio: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan


@dataclass
class Line:
    """One cell configuration across files: its key spec, label, points (ordered) and
    flagged steps."""

    key: str
    spec: dict
    label: str = ""
    points: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    #: Consecutive points beyond the threshold that could not be judged: one run on a side
    #: (verdict.ONE_RUN).
    unjudged: int = 0

    @property
    def first(self) -> float:
        return self.points[0].value

    @property
    def last(self) -> float:
        return self.points[-1].value

    @property
    def change(self) -> float:
        return self.last / self.first - 1.0 if self.first else math.nan


@dataclass
class History:
    """Everything `history` reports: the lines, the files used and those skipped."""

    options: HistoryOptions
    files: list
    skipped: list
    lines: list

    def count(self, direction: str) -> int:
        """Flagged steps of `direction` over every line."""
        return sum(s.direction == direction for line in self.lines for s in line.steps)

    @property
    def unjudged(self) -> int:
        """Changes beyond the threshold between single runs, over every line."""
        return sum(line.unjudged for line in self.lines)


def line_key(spec: dict) -> str:
    """The key that lines a cell up across files: canonical JSON of its spec without
    HISTORY_DROP (and cell_id, source)."""
    return config_key(spec, drop=HISTORY_DROP)
