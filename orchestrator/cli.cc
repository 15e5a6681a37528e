#include "orchestrator/cli.h"

#include <CLI/CLI.hpp>

#include "common/build_info.h"

namespace scalebench {

int run_cli(int argc, char** argv) {
  CLI::App app{"scalebench: benchmark DL training and inference across branches and GPUs"};
  app.set_version_flag("--version", std::string(build_info::kVersion));
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}

}  // namespace scalebench
