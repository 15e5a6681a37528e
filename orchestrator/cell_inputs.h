// Rank 0 of `scalebench run`: what travels with a dispatched cell beside its spec — the
// directory its relative paths resolve against (Assignment::tree) and the bytes of its
// TorchScript module (Assignment::artifact). See docs/branches.md#files-of-a-cell.
//
// Contract: `attach` runs at dispatch, after the branch's prepare step (which may be what
// writes the TorchScript file), so a file that a prepare step exports is found. A missing
// or unreadable input file is the cell's failure, not the run's: CellError of phase
// "inputs" naming the file, the branch and what to change; the orchestrator records the
// cell `failed` and goes on. Rank 0 only; not thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"

namespace scalebench {

class CellInputs {
 public:
  /// `no_repo_tree`: the directory of cells without a branch (the matrix file's folder).
  /// `worktrees`: ref -> absolute worktree path of each branch.
  CellInputs(const std::filesystem::path& no_repo_tree,
             std::map<std::string, std::filesystem::path> worktrees);

  /// The absolute directory `cell`'s relative paths resolve against. Throws Error when the
  /// cell's branch has no worktree (a bug: every branch is checked out before dispatch).
  [[nodiscard]] std::filesystem::path tree_of(const CellSpec& cell) const;

  /// Sets assignment.tree; for a TorchScript or AOTInductor cell, and a cell of the compile
  /// axis, reads the model into assignment.artifact. Checks that the cell's data file and
  /// checkpoint are regular files. Throws CellError(FailurePhase::kInputs) for a missing,
  /// unreadable or oversized file.
  void attach(const CellSpec& cell, Assignment& assignment);

  /// The twins of the compile axis (TwinExportOutcome::twins: cell id -> file): attach
  /// sends a twin's bytes as a TorchScript file's (Note [Compiled twins]).
  void set_compiled_twins(std::map<std::string, std::filesystem::path> twins);

 private:
  /// Bytes of `path`, reusing the previous read when the file's size and mtime are
  /// unchanged (consecutive cells of one model share it).
  std::string read_artifact(const std::filesystem::path& path, const CellSpec& cell);

  std::filesystem::path no_repo_tree_;
  std::map<std::string, std::filesystem::path> worktrees_;
  std::map<std::string, std::filesystem::path> twins_;
  struct Cached {
    std::filesystem::path path;
    std::uintmax_t size = 0;
    std::filesystem::file_time_type mtime;
    std::string bytes;
  };
  std::unique_ptr<Cached> cached_;
};

}  // namespace scalebench
