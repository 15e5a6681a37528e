// The `scalebench` executable: dispatches to the command implementations, with the
// LibTorch worker and program cells as the CellRunner of `scalebench run`.
#include "orchestrator/cli.h"
#include "program/program_cell.h"
#include "worker/aoti_model.h"
#include "worker/collective_probe.h"
#include "worker/compiled_twin.h"
#include "worker/self_test.h"
#include "worker/torch_cell_runner.h"
#include "worker/versions.h"

int main(int argc, char** argv) {
  const auto make_runner = [] {
    return scalebench::with_program_cells(scalebench::make_torch_cell_runner());
  };
  const scalebench::WorkerFactory worker{make_runner,
                                         scalebench::library_versions,
                                         scalebench::make_collective_probe,
                                         scalebench::make_self_test,
                                         scalebench::aoti_available,
                                         scalebench::write_zoo_state};
  return scalebench::run_cli(argc, argv, worker);
}
