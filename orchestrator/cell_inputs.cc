#include "orchestrator/cell_inputs.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "common/base/error.h"
#include "protocol/wire.h"

namespace scalebench {
namespace {

std::string where_text(const CellSpec& cell, const std::filesystem::path& tree) {
  return cell.branch.empty() ? "the matrix file's folder " + tree.string()
                             : "branch " + cell.branch + " (commit " + cell.commit.substr(0, 12) +
                                   ", worktree " + tree.string() + ")";
}

/// Throws CellError(FailurePhase::kInputs) unless `path` is a regular file.
void require_file(const std::filesystem::path& path, const std::string& key,
                  const std::string& written, const CellSpec& cell,
                  const std::filesystem::path& tree) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) return;
  std::string problem =
      std::filesystem::exists(path, error) ? "is not a regular file" : "does not exist";
  throw CellError(
      FailurePhase::kInputs,
      key + " '" + written + "' of " + where_text(cell, tree) + ": " + path.string() + " " +
          problem +
          (cell.branch.empty() ? "; paths are relative to the matrix file's folder"
                               : "; paths are relative to the branch's tree: commit the file on " +
                                     cell.branch + " or have its prepare step write it"));
}

}  // namespace

CellInputs::CellInputs(const std::filesystem::path& no_repo_tree,
                       std::map<std::string, std::filesystem::path> worktrees)
    : no_repo_tree_(std::filesystem::absolute(no_repo_tree).lexically_normal()),
      worktrees_(std::move(worktrees)) {}

std::filesystem::path CellInputs::tree_of(const CellSpec& cell) const {
  if (cell.branch.empty()) return no_repo_tree_;
  const auto found = worktrees_.find(cell.branch);
  if (found == worktrees_.end()) {
    throw Error("branch '" + cell.branch + "' of cell " + cell.cell_id + " has no worktree");
  }
  return found->second;
}

void CellInputs::attach(const CellSpec& cell, Assignment& assignment) {
  const auto tree = tree_of(cell);
  assignment.tree = tree.string();
  if (cell.data.kind == "hdf5") {
    require_file(resolve_in_tree(tree, cell.data.path), "data.hdf5", cell.data.path, cell, tree);
  }
  if (!cell.checkpoint.empty()) {
    require_file(resolve_in_tree(tree, cell.checkpoint), "checkpoint", cell.checkpoint, cell, tree);
  }
  if (!cell.model.torchscript.empty()) {
    const auto path = resolve_in_tree(tree, cell.model.torchscript);
    require_file(path, "model.torchscript", cell.model.torchscript, cell, tree);
    assignment.artifact = read_artifact(path, cell);
  }
  if (!cell.model.aoti.empty()) {  // the package's bytes: the worker loads them from a file
    const auto path = resolve_in_tree(tree, cell.model.aoti);
    require_file(path, "model.aoti", cell.model.aoti, cell, tree);
    assignment.artifact = read_artifact(path, cell);
  }
  if (cell.compile != CellSpec{}.compile) {  // Note [Compiled twins]
    const auto twin = twins_.find(cell.cell_id);
    if (twin == twins_.end()) {
      throw CellError(
          FailurePhase::kInputs,
          "compile: " + cell.compile + ": rank 0 exported no twin for cell " + cell_label(cell));
    }
    require_file(twin->second, "compile: " + cell.compile + " twin", twin->second.string(), cell,
                 tree);
    assignment.artifact = read_artifact(twin->second, cell);
  }
}

void CellInputs::set_compiled_twins(std::map<std::string, std::filesystem::path> twins) {
  twins_ = std::move(twins);
}

std::string CellInputs::read_artifact(const std::filesystem::path& path, const CellSpec& cell) {
  // Each call clears `error` on success: check it after both, not only the last.
  std::error_code size_error;
  std::error_code error;
  const auto size = std::filesystem::file_size(path, size_error);
  const auto mtime = std::filesystem::last_write_time(path, error);
  if (size_error) error = size_error;
  if (error) {
    throw CellError(FailurePhase::kInputs,
                    "cannot stat model file " + path.string() + ": " + error.message());
  }
  // The assignment's other fields are small; leave them a generous margin.
  if (size > kMaxMessageBytes - (1 << 20)) {
    throw CellError(FailurePhase::kInputs,
                    "TorchScript file " + path.string() + " has " + std::to_string(size) +
                        " bytes; scalebench sends a model in one MPI message of at "
                        "most 2 GiB: export a smaller model or keep its weights in a "
                        "checkpoint (inference cells)");
  }
  if (cached_ && cached_->path == path && cached_->size == size && cached_->mtime == mtime) {
    return cached_->bytes;
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) {
    throw CellError(FailurePhase::kInputs, "cannot read TorchScript file " + path.string() +
                                               " for cell " + cell_label(cell));
  }
  if (bytes.size() != size) {
    throw CellError(FailurePhase::kInputs,
                    "TorchScript file " + path.string() +
                        " changed while it was read; is a prepare step still writing it?");
  }
  cached_ = std::make_unique<Cached>(Cached{path, size, mtime, bytes});
  return bytes;
}

}  // namespace scalebench
