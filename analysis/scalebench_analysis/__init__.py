"""scalebench results analysis: tidy tables, scaling, comparisons, regression gate, reports.

>>> import scalebench_analysis as sa
>>> results = sa.load("results.h5")       # results.cells, results.timings, ...
>>> analysis = sa.analyze(results)        # analysis.sections["scaling"], ...
>>> probe = sa.load_probe("probe.h5")     # probe.rows: a `scalebench probe -o` file
"""

from .analysis import Analysis, AnalysisOptions, analyze
from .compare import GateOptions, regression_table, speedup_between_files, speedup_in_file
from .errors import AnalysisError, ProbeFileError, ResultsFileError, UsageError
from .loader import LAYOUT_1_0_THRESHOLDS, SUPPORTED_LAYOUT_MAJOR, Results, load
from .probe import Probe, is_probe_file, load_probe
from .quality import QualityOptions, straggler_table, trust_table

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
    "is_probe_file",
    "load",
    "load_probe",
    "regression_table",
    "speedup_between_files",
    "speedup_in_file",
    "straggler_table",
    "trust_table",
]
