// Resolution of a matrix's branches into commits and worktrees. See
// common/matrix/branch_resolution.h.
#include "common/matrix/branch_resolution.h"

namespace scalebench {
namespace {

bool looks_like_url(const std::string& repo) {
  return repo.find("://") != std::string::npos ||
         (repo.find('@') != std::string::npos && repo.find(':') != std::string::npos);
}

std::string where_of(const ExpandedMatrix& matrix, size_t index) {
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

std::map<std::string, std::string> resolve_matrix_commits(const ExpandedMatrix& matrix) {
  std::map<std::string, std::string> commits;
  const std::filesystem::path repo = matrix_repo_path(matrix);
  for (size_t i = 0; i < matrix.branches.size(); ++i) {
    const std::string& ref = matrix.branches[i];
    if (commits.count(ref) == 0) commits.emplace(ref, resolve_ref(repo, ref, where_of(matrix, i)));
  }
  return commits;
}

std::map<std::string, ResolvedBranch> checkout_matrix_branches(
    const ExpandedMatrix& matrix, const std::filesystem::path& work_dir) {
  std::map<std::string, ResolvedBranch> branches;
  const std::filesystem::path repo = matrix_repo_path(matrix);
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
