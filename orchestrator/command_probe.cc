// `scalebench probe`: the collectives of the DDP path over message sizes (Note [Probe
// figures] in protocol/collective_probe.h). Rank 0 prints the table and writes -o; the
// worker ranks (1..N) measure. docs/probe.md.
#include <mpi.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "common/base/error.h"
#include "orchestrator/commands.h"
#include "orchestrator/worker_job.h"
#include "results/probe_file.h"

namespace scalebench {
namespace {

struct ProbeCommandOptions {
  ProbeOptions probe;
  std::string output;
  std::string min_bytes = "8";
  std::string max_bytes = "auto";
};

/// "8", "64K", "16M", "1G" (powers of 1024) -> bytes; "auto" -> 0.
int64_t parse_bytes(const std::string& text, const char* option) {
  if (text == "auto") return 0;
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string suffix = text.substr(used);
  const int shift = suffix.empty()  ? 0
                    : suffix == "K" ? 10
                    : suffix == "M" ? 20
                    : suffix == "G" ? 30
                                    : -1;
  if (used == 0 || shift < 0 || value < 1 || value > (1LL << 40) >> shift) {
    throw InputError(std::string(option) + " " + text +
                     ": use a number of bytes, optionally with K, M or G (e.g. 8, 64K, 1G)");
  }
  return value << shift;
}

int probe_command(const ProbeCommandOptions& options, const WorkerFactory& worker) {
  if (!worker.make_probe) {
    throw FatalError("this scalebench build has no worker (built without LibTorch)");
  }
  ProbeOptions probe = options.probe;
  probe.min_bytes = parse_bytes(options.min_bytes, "--min-bytes");
  probe.max_bytes = parse_bytes(options.max_bytes, "--max-bytes");
  return run_worker_job(
      "probe", "`mpirun -np <workers+1> scalebench probe`",
      [&](MPI_Comm workers, const WorkerContext& context) {
        return to_json_text(worker.make_probe()->run(probe, workers, context));
      },
      [&](bool worked, const std::string& text) {
        if (!worked) {
          std::cerr << "scalebench probe: " << text << "\n";
          return kExitBadInput;
        }
        const ProbeReport report = probe_report_from_json_text(text);
        std::cout << format_probe_table(report) << std::flush;
        if (!options.output.empty()) {
          write_probe_file(options.output, report);
          std::cout << "# written to " << options.output << " (scalebench analyze "
                    << options.output << ")\n";
        }
        const bool all_exact = std::all_of(report.rows.begin(), report.rows.end(),
                                           [](const ProbeRow& row) { return row.ok; });
        return all_exact ? kExitOk : kExitCellsFailed;
      });
}

}  // namespace

void add_probe_command(CLI::App& app, int& exit_status, const WorkerFactory& worker) {
  auto* command = app.add_subcommand(
      "probe",
      "Time allreduce, broadcast and allgather over message sizes on the workers, with the "
      "DDP path's backend, and check every result (under mpirun/srun; rank 0 reports)");
  auto options = std::make_shared<ProbeCommandOptions>();
  command->add_option("-o,--output", options->output, "Also write the table to this HDF5 file");
  command->add_option("--min-bytes", options->min_bytes, "Smallest message (default 8)");
  command->add_option("--max-bytes", options->max_bytes,
                      "Largest message, e.g. 64M (default auto: 1G on GPUs, 16M on CPUs)");
  command->add_option("--factor", options->probe.factor, "Each size is the previous x this (2)");
  command->add_option("--iterations", options->probe.iterations, "Timed calls per size (20)");
  command->add_option("--warmup", options->probe.warmup, "Untimed calls per size first (5)");
  command
      ->add_option("--ops", options->probe.operations,
                   "Operations: allreduce broadcast allgather (default all)")
      ->delimiter(',');
  command->add_option("--device", options->probe.device, "auto, cpu or cuda (auto)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  command->add_option("--backend", options->probe.backend, "auto, mpi or nccl (auto)")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}));
  command->callback(
      [options, &exit_status, &worker] { exit_status = probe_command(*options, worker); });
}

}  // namespace scalebench
