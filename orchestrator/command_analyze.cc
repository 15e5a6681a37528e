// `scalebench analyze|compare|report|trace|watch|history|project ...`: hands every argument to the
// Python analysis package (analysis/, `python -m scalebench_analysis <command> <args...>`) and
// returns its exit status. See docs/analysis-guide.md.
#include <string>
#include <utility>
#include <vector>

#include "orchestrator/analysis_process.h"
#include "orchestrator/commands.h"

namespace scalebench {
namespace {

void add_forwarding_command(CLI::App& app, int& exit_status, const std::string& name,
                            const std::string& description) {
  auto* command = app.add_subcommand(
      name, description + " (python -m scalebench_analysis " + name + " --help)");
  // Everything after the subcommand's name, --help included, belongs to Python's parser.
  command->prefix_command();
  command->allow_extras();
  command->set_help_flag();
  command->callback([command, name, &exit_status] {
    std::vector<std::string> args = {name};
    for (const auto& arg : command->remaining()) args.push_back(arg);
    exit_status = run_analysis(args);
  });
}

}  // namespace

void add_analyze_commands(CLI::App& app, int& exit_status) {
  // Each is `python -m scalebench_analysis <name>`; the help line says so.
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"analyze", "Tables of a results file: scaling, batch size, stragglers, speedups"},
      {"compare", "Regression gate between two results files; exit 1 on a significant regression"},
      {"report", "Self-contained HTML report with plots"},
      {"trace", "Per-rank timeline of a cell or a run as a Chrome/Perfetto trace"},
      {"watch", "Follow a running sweep from another terminal until it ends"},
      {"history", "Trend of the same cells across many results files, steps beyond noise flagged"},
      {"project", "Predicted step, phases and scaling at more GPUs and nodes than were measured"},
  };
  for (const auto& [name, description] : commands) {
    add_forwarding_command(app, exit_status, name, description);
  }
}

}  // namespace scalebench
