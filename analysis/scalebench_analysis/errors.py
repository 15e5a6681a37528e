"""Errors of the analysis package. The CLI maps ResultsFileError and UsageError to exit 2."""


class AnalysisError(Exception):
    """Root of the package's errors."""


class ResultsFileError(AnalysisError):
    """The results file is missing, not a scalebench file, or of an unsupported layout."""


class UsageError(AnalysisError):
    """Bad command-line input (unknown baseline branch, malformed threshold, ...)."""


class ProbeFileError(ResultsFileError):
    """A probe file (`scalebench probe -o`) of another major version, or one whose /probe
    group lacks or damages a dataset."""
