// Resolution of a matrix's branches into commits and worktrees. See
// matrix/branch_resolution.h.
#include "matrix/branch_resolution.h"

#include <yaml-cpp/yaml.h>

#include <set>
#include <system_error>
#include <vector>

#include "common/base/diagnostics.h"

namespace scalebench {
namespace {

bool looks_like_url(const std::string& repo) {
  return repo.find("://") != std::string::npos ||
         (repo.find('@') != std::string::npos && repo.find(':') != std::string::npos);
}

/// "m.yaml:2:19: branches[1]" (the file's line:column where known), for the errors of a ref.
std::string where_of(const ExpandedMatrix& matrix, size_t index) {
  if (index < matrix.branch_where.size()) {
    const std::string text = format_diagnostic({matrix.branch_where[index], ""});
    return text.substr(0, text.size() - 2);  // without the ": " before the empty message
  }
  return matrix.path.string() + ": branches[" + std::to_string(index) + "]";
}

}  // namespace

std::filesystem::path matrix_repo_path(const ExpandedMatrix& matrix) {
  if (matrix.repo.empty()) return {};
  if (looks_like_url(matrix.repo)) {
    throw InputError(matrix.path.string() + ": repo: '" + matrix.repo +
                     "' looks like a URL; scalebench does not clone repositories. Clone it "
                     "(`git clone " +
                     matrix.repo + " <dir>`) and write repo: <dir>");
  }
  std::filesystem::path repo(matrix.repo);
  if (repo.is_absolute()) return repo;
  return std::filesystem::absolute(matrix.path).parent_path() / repo;
}

std::filesystem::path default_work_dir(const std::filesystem::path& output_path) {
  return std::filesystem::path(output_path.string() + ".work");
}

namespace {

/// A ref of the matrix that names no commit (or a problem of its repo): `index` into
/// `branches`, `text` as resolve_ref says it (prefixed by where_of), `problem` the same
/// without that prefix.
struct RefProblem {
  size_t index = 0;
  std::string text;
  std::string problem;
};

/// Resolves every ref of `matrix` once into `commits` (ref -> full commit id) and returns
/// the ones that fail, in the file's order; a problem of the repo itself (no " ref " in it)
/// is returned once, not per branch. The one loop of resolve_matrix_commits and
/// add_ref_errors_beside_file_errors.
std::vector<RefProblem> resolve_every_ref(const ExpandedMatrix& matrix,
                                          std::map<std::string, std::string>& commits) {
  const std::filesystem::path repo = matrix_repo_path(matrix);
  std::vector<RefProblem> problems;
  std::set<std::string> said;
  for (size_t i = 0; i < matrix.branches.size(); ++i) {
    const std::string& ref = matrix.branches[i];
    if (commits.count(ref) != 0) continue;
    const std::string where = where_of(matrix, i);
    try {
      commits.emplace(ref, resolve_ref(repo, ref, where));
    } catch (const InputError& error) {
      const std::string text = error.what();
      const std::string problem = text.rfind(where, 0) == 0 ? text.substr(where.size()) : text;
      if (problem.find(" ref ") == std::string::npos && !said.insert(problem).second) continue;
      problems.push_back({i, text, problem});
    }
  }
  return problems;
}

}  // namespace

std::map<std::string, std::string> resolve_matrix_commits(const ExpandedMatrix& matrix) {
  std::map<std::string, std::string> commits;
  std::string errors;  // every bad ref of the file at once, as for keys
  for (const auto& found : resolve_every_ref(matrix, commits)) {
    errors += (errors.empty() ? "" : "\n") + found.text;
  }
  if (!errors.empty()) throw InputError(errors);
  return commits;
}

void add_ref_errors_beside_file_errors(const std::filesystem::path& path, const std::string& text,
                                       Diagnostics& diagnostics) {
  ExpandedMatrix matrix;
  matrix.path = path;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || !root["repo"] || !root["repo"].IsScalar()) return;
    const YAML::Node branches = root["branches"];
    if (!branches || !branches.IsSequence()) return;
    matrix.repo = root["repo"].Scalar();
    for (size_t i = 0; i < branches.size(); ++i) {
      if (!branches[i].IsScalar()) return;
      matrix.branches.push_back(branches[i].Scalar());
      const YAML::Mark mark = branches[i].Mark();
      matrix.branch_where.push_back(
          {path.string(), mark.line + 1, mark.column + 1, "branches[" + std::to_string(i) + "]"});
    }
    std::error_code ec;
    if (!std::filesystem::exists(matrix_repo_path(matrix) / ".git", ec)) return;
  } catch (const std::exception&) {
    return;  // the YAML or the repo: itself is what is wrong: the file's errors say so
  }
  std::map<std::string, std::string> commits;
  for (const auto& found : resolve_every_ref(matrix, commits)) {
    // where_of gave "<file>:<line>:<column>: branches[i]"; the diagnostic says it again.
    const std::string& problem = found.problem;
    diagnostics.error(matrix.branch_where[found.index],
                      problem.rfind(": ", 0) == 0 ? problem.substr(2) : problem);
  }
}

std::map<std::string, ResolvedBranch> checkout_matrix_branches(
    const ExpandedMatrix& matrix, const std::filesystem::path& work_dir) {
  std::map<std::string, ResolvedBranch> branches;
  const std::filesystem::path repo = matrix_repo_path(matrix);
  // Every ref resolved before the first worktree is made: a bad one leaves nothing behind.
  resolve_matrix_commits(matrix);
  for (size_t i = 0; i < matrix.branches.size(); ++i) {
    const std::string& ref = matrix.branches[i];
    if (branches.count(ref) != 0) continue;
    branches.emplace(ref, checkout_branch(repo, ref, work_dir, where_of(matrix, i)));
  }
  return branches;
}

std::map<std::string, std::string> commits_of(
    const std::map<std::string, ResolvedBranch>& branches) {
  std::map<std::string, std::string> commits;
  for (const auto& [ref, branch] : branches) commits.emplace(ref, branch.commit);
  return commits;
}

}  // namespace scalebench
