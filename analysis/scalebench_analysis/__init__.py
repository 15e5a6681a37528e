"""scalebench results analysis: tidy tables, scaling, comparisons, regression gate, reports.

>>> import scalebench_analysis as sa
>>> results = sa.load("results.h5")       # results.cells, results.timings, ...
>>> analysis = sa.analyze(results)        # analysis.sections["scaling"], ...
>>> probe = sa.load_probe("probe.h5")     # probe.rows: a `scalebench probe -o` file

Subpackages, each importing only from those before it: read/ (results files into tables:
`read.loader.load`), tables/ (the analyses: `tables.analysis.analyze`), output/ (renderings,
plots, the report, trace and watch), history/ (`scalebench history`); cli.py, the command
table, on top; errors.py and arguments.py below all of them.
"""

from .errors import AnalysisError, ProbeFileError, ResultsFileError, UsageError
from .read.cells import LAYOUT_1_0_THRESHOLDS
from .read.loader import SUPPORTED_LAYOUT_MAJOR, Results, load
from .tables.analysis import Analysis, AnalysisOptions, analyze
from .tables.compare import (
    GateOptions,
    compare_tables,
    regression_table,
    speedup_between_files,
    speedup_in_file,
)
from .tables.probe import Probe, is_probe_file, load_probe
from .tables.quality import QualityOptions, straggler_table, trust_table
from .tables.straggler_nodes import straggler_node_table

__version__ = "0.1.0"
__all__ = [
    "Analysis",
    "AnalysisOptions",
    "AnalysisError",
    "GateOptions",
    "LAYOUT_1_0_THRESHOLDS",
    "Probe",
    "ProbeFileError",
    "QualityOptions",
    "Results",
    "ResultsFileError",
    "SUPPORTED_LAYOUT_MAJOR",
    "UsageError",
    "analyze",
    "compare_tables",
    "is_probe_file",
    "load",
    "load_probe",
    "regression_table",
    "speedup_between_files",
    "speedup_in_file",
    "straggler_node_table",
    "straggler_table",
    "trust_table",
]
