// The Python analysis package run as a child process: what `scalebench analyze|compare|...`
// forward to, and what `scalebench run` ends with (Note [The run ends with the answer]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "orchestrator/adaptive_rounds.h"

namespace scalebench {

/// Runs `<python> -m scalebench_analysis <args...>` (no shell) with this process's stdin,
/// stdout, stderr and environment, waits, and returns its exit status (128 + signal when a
/// signal ended it). The interpreter is $SCALEBENCH_PYTHON, else the build's
/// SCALEBENCH_PYTHON. Throws InputError when there is none or it cannot be started.
int run_analysis(const std::vector<std::string>& args);

/// Note [Adaptive repetitions]: `python -m scalebench_analysis decide <results> --look <k>
/// --format json` on the durable file before adaptive round `round` (k = round: the runs per
/// series so far); its stdout is {"undecided": [series_id, ...], "summary": "..."}. Throws
/// Error when the analysis fails, times out (120 s) or prints something else.
AdaptiveLook look_at_results(const std::filesystem::path& results, int64_t round);

/// The Python interpreter of the analysis (and of rank 0's exports, Note [Compiled twins]):
/// $SCALEBENCH_PYTHON, else the build's SCALEBENCH_PYTHON. Throws InputError when neither.
std::string python_interpreter();

}  // namespace scalebench
