// The Python analysis package run as a child process: what `scalebench analyze|compare|...`
// forward to, and what `scalebench run` ends with (Note [The run ends with the answer]).
#pragma once

#include <string>
#include <vector>

namespace scalebench {

/// Runs `<python> -m scalebench_analysis <args...>` (no shell) with this process's stdin,
/// stdout, stderr and environment, waits, and returns its exit status (128 + signal when a
/// signal ended it). The interpreter is $SCALEBENCH_PYTHON, else the build's
/// SCALEBENCH_PYTHON. Throws InputError when there is none or it cannot be started.
int run_analysis(const std::vector<std::string>& args);

/// The Python interpreter of the analysis (and of rank 0's exports, Note [Compiled twins]):
/// $SCALEBENCH_PYTHON, else the build's SCALEBENCH_PYTHON. Throws InputError when neither.
std::string python_interpreter();

}  // namespace scalebench
