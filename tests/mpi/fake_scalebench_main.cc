// `scalebench` with the fake CellRunner (tests/mpi/fake_cell_runner.h) instead of the
// LibTorch one: the whole `run` / `info` command path without models, for the
// orchestrator's fault tests (tests/faults/) and builds without Torch. Program cells run for
// real (they need no Torch), so their fault tests run here too.
#include "fake_cell_runner.h"
#include "orchestrator/cli.h"
#include "program/program_cell.h"
#include "protocol/fault_injection.h"

int main(int argc, char** argv) {
  scalebench::enable_fault_injection();  // Note [Fault injection]: test binaries only
  scalebench::WorkerFactory worker;
  worker.make_runner = [] {
    return scalebench::with_program_cells(scalebench::testing_fake::make_fake_cell_runner());
  };
  worker.library_versions = [] {
    return std::map<std::string, std::string>{{"torch", ""}, {"cuda", ""}, {"nccl", ""}};
  };
  return scalebench::run_cli(argc, argv, worker);
}
