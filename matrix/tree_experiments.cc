// Experiments read from the branch trees. See matrix/tree_experiments.h.
#include "matrix/tree_experiments.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>
#include <utility>

#include "matrix/branch_resolution.h"
#include "matrix/git_repo.h"
#include "matrix/request.h"

namespace scalebench {
namespace {

constexpr std::size_t kMaxTreeExperimentNameBytes = 200;

bool is_name_char(unsigned char c) {
  return std::isalnum(c) != 0 || (c != 0 && std::strchr("_.+-/", c) != nullptr);
}

std::string char_text(unsigned char c) {
  if (c == ' ') return "a space";
  if (c < 0x20 || c >= 0x7f) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("the byte \\x") + kHex[c >> 4] + kHex[c & 0xf];
  }
  return std::string("'") + static_cast<char>(c) + "'";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <typename T>
void overlay(Setting<T>& out, const Setting<T>& over) {
  if (over.value) out = over;
}

/// The settings written on the matrix entry replace the file's.
void overlay_settings(SettingsRequest& out, const SettingsRequest& over) {
  for (const auto& [key, setting] : over.values) out.values[key] = setting;
}

/// The file's experiment with the entry's keys written over it, for `branch` only.
ExperimentRequest merge(const ExperimentRequest& entry, ExperimentRequest file,
                        const std::string& branch) {
  const auto written = [&entry](const char* key) { return entry.written_keys.count(key) > 0; };
  overlay_settings(file.settings, entry.settings);
  overlay(file.prepare_argv, entry.prepare_argv);
  overlay(file.prepare_timeout_s, entry.prepare_timeout_s);
  if (written("model")) {
    file.model = entry.model;
    file.model_where = entry.model_where;
  }
  if (written("program")) {
    file.program = entry.program;
    file.program_where = entry.program_where;
  }
  // An empty input_shape or a 0 num_classes on the entry means "the model's default".
  if (written("input_shape")) file.input_shape = entry.input_shape;
  if (written("num_classes")) file.num_classes = entry.num_classes;
  if (written("data")) file.data = entry.data;
  if (written("checkpoint")) file.checkpoint = entry.checkpoint;
  if (written("name")) {
    file.name = entry.name;
  } else if (file.written_keys.count("name") == 0) {
    file.name = entry.tree_name;
  }
  file.where = entry.where;  // the cells' source: the matrix entry
  file.only_branch = branch;
  file.tree_name.clear();
  return file;
}

/// One Diagnostics per file keeps each file's lines together (they sort by line only).
class Problems {
 public:
  void add(const Diagnostics& diagnostics) {
    if (!diagnostics.has_errors()) return;
    std::string text = diagnostics.error_text();
    std::size_t begin = 0;
    while (begin <= text.size()) {
      const std::size_t end = std::min(text.find('\n', begin), text.size());
      std::string line = text.substr(begin, end - begin);
      if (!line.empty() && std::find(lines_.begin(), lines_.end(), line) == lines_.end())
        lines_.push_back(std::move(line));
      begin = end + 1;
    }
  }
  void throw_if_any() const {
    if (!lines_.empty()) throw MatrixError(join(lines_, "\n"));
  }

 private:
  std::vector<std::string> lines_;
};

/// Reads, checks and merges the file of `entry` at `branch`'s commit; nothing on problems.
std::optional<ExperimentRequest> read_tree_experiment(
    const ExperimentRequest& entry, const std::string& branch, const std::string& commit,
    const std::filesystem::path& repo, const MatrixRequest& request, const MatrixLimits& limits,
    Problems& problems) {
  const std::string path = tree_experiment_path(entry.tree_name);
  const std::string file = branch + ":" + path;
  Diagnostics diagnostics;
  std::string text;
  try {
    text = read_file_at_commit(repo, commit, path, branch);
  } catch (const InputError& e) {
    diagnostics.error(entry.tree_where, e.what());
    problems.add(diagnostics);
    return std::nullopt;
  }
  auto from_file = read_yaml_experiment(text, file, diagnostics);
  if (!from_file) {
    problems.add(diagnostics);
    return std::nullopt;
  }
  ExperimentRequest merged = merge(entry, std::move(*from_file), branch);
  // The semantic checks of this experiment alone, so that its lines stay together.
  MatrixRequest alone;
  alone.file = request.file;
  alone.branches = request.branches;
  alone.defaults = request.defaults;
  alone.experiments.push_back(merged);
  expand_matrix(alone, limits, {}, diagnostics);
  problems.add(diagnostics);
  if (diagnostics.has_errors()) return std::nullopt;
  return merged;
}

/// Experiment names must be unique among the experiments of each branch.
void check_names(const MatrixRequest& resolved, Diagnostics& diagnostics) {
  for (const auto& branch : resolved.branches) {
    std::map<std::string, const ExperimentRequest*> names;
    for (const auto& experiment : resolved.experiments) {
      if (experiment.only_branch && *experiment.only_branch != branch) continue;
      const auto [previous, inserted] = names.emplace(experiment.name, &experiment);
      if (inserted) continue;
      diagnostics.error(experiment.where,
                        "experiment name '" + experiment.name + "' (branch " + branch +
                            ") is already used by the experiment on line " +
                            std::to_string(previous->second->where.line) +
                            "; give each experiment a unique name (name: on the entry)");
    }
  }
}

/// Tree experiments' prepare steps; one experiment must have one step on every branch.
void collect_prepare(const ExpandedMatrix& matrix, const MatrixRequest& resolved,
                     std::map<std::string, PrepareSpec>& out, Diagnostics& diagnostics) {
  std::map<std::string, std::pair<std::string, PrepareSpec>> first;  // name -> (branch, step)
  for (const auto& experiment : resolved.experiments) {
    if (!experiment.only_branch) continue;  // inline: set by load_matrix
    PrepareSpec own = matrix.prepare;
    if (experiment.prepare_argv.value) own.argv = *experiment.prepare_argv.value;
    if (experiment.prepare_timeout_s.value) own.timeout_s = *experiment.prepare_timeout_s.value;
    const auto [previous, inserted] =
        first.emplace(experiment.name, std::make_pair(*experiment.only_branch, own));
    if (!inserted && !(previous->second.second == own)) {
      diagnostics.error(experiment.where,
                        "experiment '" + experiment.name + "' has a different prepare step on " +
                            previous->second.first + " and on " + *experiment.only_branch +
                            " (from their " + kTreeExperimentDir +
                            " files); write prepare (and prepare_timeout_s) on this entry so "
                            "that all branches share one");
    }
  }
  for (const auto& [name, step] : first) {
    if (!(step.second == matrix.prepare)) out[name] = step.second;
  }
}

}  // namespace

std::string tree_experiment_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxTreeExperimentNameBytes)
    return "is " + std::to_string(name.size()) + " bytes long (at most " +
           std::to_string(kMaxTreeExperimentNameBytes) + ")";
  for (unsigned char c : name) {
    if (!is_name_char(c))
      return "contains " + char_text(c) + "; allowed are ASCII letters, digits and _ . + - /";
  }
  if (name.front() == '/') return "starts with '/' (it is relative to configs/experiment/)";
  if (name.find("..") != std::string::npos) return "contains '..'";
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t slash = std::min(name.find('/', begin), name.size());
    const std::string part = name.substr(begin, slash - begin);
    if (part.empty()) return "has an empty path component (a trailing or double '/')";
    if (part.front() == '.') return "has a path component starting with '.' ('" + part + "')";
    begin = slash + 1;
  }
  if (ends_with(name, ".yaml") || ends_with(name, ".yml"))
    return "ends in the file extension (scalebench adds .yaml)";
  return {};
}

std::string tree_experiment_path(const std::string& name) {
  return std::string(kTreeExperimentDir) + "/" + name + ".yaml";
}

MatrixRequest resolve_tree_experiments(const ExpandedMatrix& matrix,
                                       const std::map<std::string, std::string>& commits_by_ref,
                                       std::map<std::string, PrepareSpec>& tree_prepare) {
  if (!matrix.request) {
    throw Error(matrix.path.string() + ": the matrix has no request to resolve");
  }
  const MatrixRequest& request = *matrix.request;
  if (matrix.tree_experiments.empty()) return request;
  const std::filesystem::path repo = matrix_repo_path(matrix);
  MatrixRequest resolved = request;
  resolved.experiments.clear();
  Problems problems;
  for (const auto& entry : request.experiments) {
    if (entry.tree_name.empty()) {
      resolved.experiments.push_back(entry);
      continue;
    }
    for (const auto& branch : request.branches) {
      const auto commit = commits_by_ref.find(branch);
      if (commit == commits_by_ref.end()) {
        throw Error(matrix.path.string() + ": branch '" + branch +
                    "' was not resolved to a commit before reading its tree experiments");
      }
      auto merged = read_tree_experiment(entry, branch, commit->second, repo, request,
                                         matrix.limits, problems);
      if (merged) resolved.experiments.push_back(std::move(*merged));
    }
  }
  problems.throw_if_any();
  Diagnostics diagnostics;
  check_names(resolved, diagnostics);
  collect_prepare(matrix, resolved, tree_prepare, diagnostics);
  problems.add(diagnostics);
  problems.throw_if_any();
  return resolved;
}

}  // namespace scalebench
