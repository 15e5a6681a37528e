// `scalebench selftest`: the checks a user runs on a new machine or allocation before
// trusting its numbers (docs/selftest.md). The Torch-free contract between the command
// (rank 0 prints) and the worker library (the workers check).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "protocol/cell_runner.h"

namespace scalebench {

struct SelfTestCheck {
  std::string name;    ///< devices, collectives, ddp, timer, cuda-timer, cuda-memory, oom
  std::string status;  ///< pass, fail or skip
  std::string detail;  ///< the figures, or why it failed or was skipped, in one line
};

class SelfTest {
 public:
  virtual ~SelfTest() = default;
  /// Collective over `workers` (every worker rank calls it); every rank returns the same
  /// list, in a fixed order. A check that fails is reported, never thrown.
  virtual std::vector<SelfTestCheck> run(MPI_Comm workers, const WorkerContext& context) = 0;
};

/// One check per line ("PASS  devices  ..."), then the counts.
std::string format_self_test(const std::vector<SelfTestCheck>& checks);

/// JSON text of the checks (rank 0 receives them from the workers), and back.
std::string to_json_text(const std::vector<SelfTestCheck>& checks);
std::vector<SelfTestCheck> self_test_checks_from_json_text(const std::string& text);

}  // namespace scalebench
