#include "common/cell/program.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "common/cell/cell_spec.h"
#include "common/cell/settings.h"

namespace scalebench {

const std::vector<std::string> kProgramPlaceholders{
    "world_size", "local_world_size", "num_nodes", "steps",      "mode",  "branch",
    "commit",     "experiment",       "cell_id",   "output_dir", "python"};

const std::vector<std::string> kLauncherEnvironmentPrefixes{
    "OMPI_", "PMIX_", "PMI_", "SLURM_", "PRTE_", "OPAL_", "HYDRA_", "I_MPI_", "MPI_LOCAL"};

std::string to_string(PreflightKind kind) {
  switch (kind) {
    case PreflightKind::kNone:
      return "none";
    case PreflightKind::kHydra:
      return "hydra";
    case PreflightKind::kCommand:
      return "command";
  }
  return "none";
}

namespace {

/// Calls on_text(literal) and on_name(name) for the parts of `text`, in order.
template <typename OnText, typename OnName>
void scan_placeholders(const std::string& text, OnText on_text, OnName on_name) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      on_text("{");
      i += 2;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      on_text("}");
      i += 2;
    } else if (c == '{') {
      const size_t close = text.find('}', i + 1);
      if (close == std::string::npos) {
        throw std::invalid_argument("'{' without its '}' in '" + text +
                                    "' (write {{ for a literal brace)");
      }
      on_name(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '}') {
      throw std::invalid_argument("lone '}' in '" + text + "' (write }} for a literal brace)");
    } else {
      on_text(std::string(1, c));
      ++i;
    }
  }
}

}  // namespace

std::vector<std::string> placeholder_names(const std::string& text) {
  std::vector<std::string> names;
  scan_placeholders(
      text, [](const std::string&) {}, [&](const std::string& name) { names.push_back(name); });
  return names;
}

bool is_program_placeholder(const std::string& name) {
  if (std::find(kProgramPlaceholders.begin(), kProgramPlaceholders.end(), name) !=
      kProgramPlaceholders.end()) {
    return true;
  }
  return find_setting(name) != nullptr;
}

std::string substitute_placeholders(const std::string& text,
                                    const std::map<std::string, std::string>& values) {
  std::string out;
  scan_placeholders(
      text, [&](const std::string& literal) { out += literal; },
      [&](const std::string& name) {
        const auto found = values.find(name);
        if (found == values.end()) {
          throw std::invalid_argument("unknown placeholder {" + name + "} in '" + text + "'");
        }
        out += found->second;
      });
  return out;
}

std::map<std::string, std::string> placeholder_values(const CellSpec& cell,
                                                      const std::string& output_dir,
                                                      const std::string& device) {
  std::map<std::string, std::string> values;
  for (const auto& setting : settings_table()) {
    values[std::string(setting.key)] = setting_text(setting, setting.get(cell));
  }
  values["world_size"] = std::to_string(cell.world_size);
  // A single-node layout until the worker knows where the group's ranks are (it replaces
  // these two with the real ones when it launches the program).
  values["local_world_size"] = std::to_string(cell.world_size);
  values["num_nodes"] = std::to_string(1);  // not a literal: GCC 12's -Wrestrict false positive
  // Note [Program profiles] (program/program_profile.h): after the measured steps.
  values["steps"] =
      std::to_string(cell.warmup_iterations + cell.measured_iterations + cell.profile_steps);
  values["mode"] = to_string(cell.mode);
  values["branch"] = cell.branch;
  values["commit"] = cell.commit;
  values["experiment"] = cell.experiment;
  values["cell_id"] = cell.cell_id;
  values["output_dir"] = output_dir;
  values["device"] = device;
  values["python"] = program_interpreter(cell.program);
  return values;
}

std::string escape_braces(const std::string& text) {
  std::string out;
  for (const char c : text) {
    out += c;
    if (c == '{' || c == '}') out += c;
  }
  return out;
}

std::string substitute_known_placeholders(const std::string& text,
                                          const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out.append(2, c);  // an escaped brace stays escaped for the cell's substitution
      i += 2;
      continue;
    }
    if (c == '{') {
      const size_t close = text.find('}', i + 1);
      if (close != std::string::npos) {
        const auto found = values.find(text.substr(i + 1, close - i - 1));
        if (found != values.end()) {
          out += escape_braces(found->second);
          i = close + 1;
          continue;
        }
      }
    }
    out += c;
    ++i;
  }
  return out;
}

std::string program_interpreter(const ProgramSpec& program) {
  if (program.python.empty()) return "python3";
  return program.python;
}

std::vector<std::string> program_argv(const ProgramSpec& program,
                                      std::map<std::string, std::string> values) {
  const std::string interpreter = program_interpreter(program);
  values["python"] = interpreter;
  std::vector<std::string> argv;
  for (const auto& arg : program.command) argv.push_back(substitute_placeholders(arg, values));
  if (!program.python.empty() && !argv.empty() && (argv[0] == "python" || argv[0] == "python3")) {
    argv[0] = interpreter;
  }
  return argv;
}

std::vector<std::string> preflight_argv(const ProgramSpec& program,
                                        const std::map<std::string, std::string>& values) {
  switch (program.preflight.kind) {
    case PreflightKind::kNone:
      return {};
    case PreflightKind::kHydra: {
      auto argv = program_argv(program, values);
      argv.insert(argv.end(), {"--cfg", "job"});
      return argv;
    }
    case PreflightKind::kCommand: {
      ProgramSpec check = program;
      check.command = program.preflight.command;
      return program_argv(check, values);
    }
  }
  return {};
}

std::optional<std::string> activated_path(const ProgramSpec& program,
                                          const std::string& caller_path) {
  const std::filesystem::path interpreter(program_interpreter(program));
  if (program.python.empty() || !interpreter.has_parent_path()) return std::nullopt;
  return interpreter.parent_path().string() + (caller_path.empty() ? "" : ":" + caller_path);
}

}  // namespace scalebench
