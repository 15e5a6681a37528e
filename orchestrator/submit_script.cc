#include "orchestrator/submit_script.h"

#include <algorithm>
#include <array>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/base/decimal.h"
#include "common/base/error.h"

namespace scalebench {
namespace {

// clang-format off
constexpr std::string_view kTemplate =
#include "slurm/sbatch_template.inc"
    ;
// clang-format on

// Note [Slurm job layout]
// One homogeneous job: `--nodes=N --ntasks-per-node=W+1` (W = G, or --workers-per-node on
// CPU-only clusters) and, with GPUs, `--gpus-per-node=G`. The job step starts N*W+1 tasks
// with `--distribution=cyclic`: task 0 (the orchestrator, rank 0) lands on node 0, and the
// round robin leaves exactly W workers on every node (W+1 tasks on node 0, W elsewhere),
// whatever N is. Each node's spare slot beyond node 0 stays idle: one CPU per node.
// Every task sees its node's G GPUs; each worker takes the GPU of its node-local worker
// index (DESIGN.md: MPI_Comm_split_type(SHARED), rank 0 not counted), so each GPU has
// exactly one worker and rank 0 uses none.
// Why not a heterogeneous job (orchestrator component without GPU + worker component with
// --gpus-per-task=1)? On Slurm 22.05 a hetjob whose components share a node stayed pending
// (Reason=Resources, node IDLE+PLANNED) on the one-node test cluster, and per-task GPU
// binding (--gpus-per-task or --gpu-bind=map_gpu) cannot leave rank 0 out of the GPUs in a
// homogeneous step, because node 0 has one task more than the other nodes.

constexpr int kMaxNodes = 100000;
constexpr int kMaxGpusPerNode = 64;
constexpr int kMaxWorkersPerNode = 4096;
constexpr int kMaxSignalLeadS = 65535;  // sbatch's limit for --signal=...@<sig_time>

[[noreturn]] void reject(const std::string& flag, std::string_view value, const std::string& why) {
  throw InputError("scalebench submit: " + flag + " '" + std::string(value) + "': " + why);
}

void check_range(const std::string& flag, int value, int low, int high) {
  if (value < low || value > high) {
    reject(flag, std::to_string(value),
           "must be between " + std::to_string(low) + " and " + std::to_string(high));
  }
}

// A value that becomes an #SBATCH directive: sbatch, not the shell, parses those lines,
// so instead of quoting, only a character set without blanks, quotes or `$` is accepted.
void check_directive(const std::string& flag, const std::string& value, const std::regex& pattern,
                     const std::string& allowed) {
  if (value.empty()) {
    return;
  }
  if (!std::regex_match(value, pattern)) {
    reject(flag, value, "use only " + allowed);
  }
}

void check_path(const std::string& flag, const std::filesystem::path& path) {
  const std::string text = path.string();
  if (text.empty() || !path.is_absolute()) {
    reject(flag, text, "internal: the path must be absolute");
  }
  const bool has_control = std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
  if (has_control) {
    reject(flag, text, "the path contains a control character (newline, tab, ...); rename it");
  }
}

void check_resources(const SubmitOptions& o) {
  check_range("--nodes", o.nodes, 1, kMaxNodes);
  check_range("--gpus-per-node", o.gpus_per_node, 0, kMaxGpusPerNode);
  if (o.gpus_per_node > 0 && o.workers_per_node != 0) {
    reject("--workers-per-node", std::to_string(o.workers_per_node),
           "only for CPU-only jobs (--gpus-per-node 0); with GPUs there is one worker per GPU");
  }
  if (o.gpus_per_node == 0) {
    if (o.workers_per_node == 0) {
      reject("--gpus-per-node", "0",
             "CPU-only jobs need --workers-per-node W (CPU workers per node)");
    }
    check_range("--workers-per-node", o.workers_per_node, 1, kMaxWorkersPerNode);
  }
  check_range("--signal-lead-s", o.signal_lead_s, 1, kMaxSignalLeadS);
}

void check_directives(const SubmitOptions& o) {
  static const std::regex kName{R"([A-Za-z0-9_.-]+)"};
  static const std::regex kNameList{R"([A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*)"};
  static const std::regex kConstraint{R"([A-Za-z0-9_.&|,*:\[\]()-]+)"};
  check_directive("--partition", o.partition, kNameList, "letters, digits, _ . - (a list: p1,p2)");
  check_directive("--account", o.account, kName, "letters, digits, _ . -");
  check_directive("--constraint", o.constraint, kConstraint,
                  "feature names (letters, digits, _ . -) joined by & | , * : [ ] ( )");
  if (o.job_name.empty() || o.job_name.size() > 64) {
    reject("--job-name", o.job_name, "use 1 to 64 characters");
  }
  check_directive("--job-name", o.job_name, kName, "letters, digits, _ . -");
  if (!o.time_limit.empty()) {
    const std::int64_t limit_s = parse_slurm_time_limit_s(o.time_limit);
    if (o.signal_lead_s >= limit_s) {
      reject("--signal-lead-s", std::to_string(o.signal_lead_s),
             "must be shorter than the --time limit (" + std::to_string(limit_s) + " s)");
    }
  }
}

std::string render_directives(const SubmitOptions& o, const SubmitLayout& layout) {
  std::vector<std::string> lines{
      "--job-name=" + o.job_name,
      "--nodes=" + std::to_string(o.nodes),
      "--ntasks-per-node=" + std::to_string(layout.tasks_per_node),
  };
  if (o.gpus_per_node > 0) {
    lines.push_back("--gpus-per-node=" + std::to_string(o.gpus_per_node));
  }
  lines.push_back("--signal=B:USR1@" + std::to_string(o.signal_lead_s));
  const std::array<std::pair<const char*, const std::string*>, 4> optional{{
      {"--partition=", &o.partition},
      {"--time=", &o.time_limit},
      {"--account=", &o.account},
      {"--constraint=", &o.constraint},
  }};
  for (const auto& [flag, value] : optional) {
    if (!value->empty()) {
      lines.push_back(flag + *value);
    }
  }
  if (o.requeue) {
    lines.emplace_back("--requeue");
    lines.emplace_back("--open-mode=append");  // a requeued job keeps its earlier log
  } else {
    lines.emplace_back("--no-requeue");
  }
  std::string out;
  for (const auto& line : lines) {
    out += (out.empty() ? "" : "\n") + std::string("#SBATCH ") + line;
  }
  return out;
}

std::string render_layout(const SubmitOptions& o, const SubmitLayout& layout) {
  std::ostringstream text;
  text << o.nodes << " node(s) x " << layout.workers_per_node
       << (o.gpus_per_node > 0 ? " GPU worker(s)" : " CPU worker(s)")
       << " + 1 orchestrator = " << layout.total_tasks << " MPI ranks (see docs/cluster-guide.md)";
  return text.str();
}

// Replaces every @NAME@ of the template in one left-to-right pass; inserted values are
// not scanned again. An unknown or unterminated placeholder is a bug in the template.
std::string substitute(std::string_view text,
                       const std::vector<std::pair<std::string, std::string>>& values) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = text.find('@', pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    const std::size_t close = text.find('@', open + 1);
    if (close == std::string_view::npos) {
      throw std::logic_error("sbatch template: unterminated placeholder");
    }
    const std::string_view name = text.substr(open + 1, close - open - 1);
    const auto it = std::find_if(values.begin(), values.end(),
                                 [&](const auto& entry) { return entry.first == name; });
    if (it == values.end()) {
      throw std::logic_error("sbatch template: unknown placeholder @" + std::string(name) + "@");
    }
    out.append(text.substr(pos, open - pos));
    out.append(it->second);
    pos = close + 1;
  }
}

}  // namespace

void validate_submit_options(const SubmitOptions& options) {
  check_path("scalebench executable", options.scalebench_exe);
  check_path("matrix", options.matrix_path);
  check_path("-o/--output", options.output_path);
  if (options.setup_file) {
    check_path("--setup-file", *options.setup_file);
  }
  check_resources(options);
  check_directives(options);
}

SubmitLayout submit_layout(const SubmitOptions& options) {
  SubmitLayout layout;
  layout.workers_per_node =
      options.gpus_per_node > 0 ? options.gpus_per_node : options.workers_per_node;
  layout.tasks_per_node = layout.workers_per_node + 1;
  layout.total_tasks = options.nodes * layout.workers_per_node + 1;
  return layout;
}

std::string render_batch_script(const SubmitOptions& options) {
  validate_submit_options(options);
  const SubmitLayout layout = submit_layout(options);
  std::string setup;
  if (options.setup_file) {
    setup = "\n# --setup-file: modules, virtualenv, environment for every task of the step\n. " +
            shell_quote(options.setup_file->string()) + "\n";
  }
  return substitute(kTemplate, {
                                   {"SBATCH_DIRECTIVES", render_directives(options, layout)},
                                   {"LAYOUT", render_layout(options, layout)},
                                   {"SCALEBENCH", shell_quote(options.scalebench_exe.string())},
                                   {"MATRIX", shell_quote(options.matrix_path.string())},
                                   {"OUTPUT", shell_quote(options.output_path.string())},
                                   {"TASKS", std::to_string(layout.total_tasks)},
                                   {"REQUEUE", options.requeue ? "1" : "0"},
                                   {"SETUP", setup},
                               });
}

std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'') {
      out += R"('\'')";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::int64_t parse_slurm_time_limit_s(std::string_view text) {
  // days-hours[:minutes[:seconds]] | minutes[:seconds] | hours:minutes:seconds
  static const std::regex kDays{R"((\d{1,5})-(\d{1,5})(?::(\d{1,5})(?::(\d{1,5}))?)?)"};
  static const std::regex kClock{R"((\d{1,7})(?::(\d{1,5})(?::(\d{1,5}))?)?)"};
  const std::string value(text);
  std::smatch m;
  auto number = [&m](std::size_t i) -> std::int64_t {
    return m[i].matched ? std::stoll(m[i].str()) : 0;
  };
  std::int64_t seconds = 0;
  if (std::regex_match(value, m, kDays)) {
    seconds = ((number(1) * 24 + number(2)) * 60 + number(3)) * 60 + number(4);
  } else if (std::regex_match(value, m, kClock)) {
    seconds =
        m[3].matched ? (number(1) * 60 + number(2)) * 60 + number(3) : number(1) * 60 + number(2);
  } else {
    reject("--time", text,
           "use minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
           "days-hours:minutes or days-hours:minutes:seconds (e.g. 2:00:00)");
  }
  if (seconds == 0) {
    reject("--time", text, "a zero limit means none in Slurm; omit --time instead");
  }
  return seconds;
}

std::string parse_sbatch_job_id(std::string_view parsable_output) {
  const std::size_t end = parsable_output.find_first_of(";\r\n");
  const std::string_view id = parsable_output.substr(0, end);
  const auto number = parse_decimal(id);
  if (!number || *number < 0) {
    throw Error("sbatch printed no job id (expected `<id>` or `<id>;<cluster>`), got: '" +
                std::string(parsable_output) + "'");
  }
  return std::string(id);
}

}  // namespace scalebench
