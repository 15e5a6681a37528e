// The folder of a program cell on this rank: <temp>/scalebench-program-<cell id>-<worker pid>,
// holding each rank's {output_dir}. One owner removes it on every way out of the cell.
#pragma once

#include <filesystem>
#include <string>

namespace scalebench::program {

/// Owns a program cell's folder (the name of Note [Program folder sweep]): made by the first
/// launch, removed with everything in it when the owner goes, whether the cell returns or
/// throws (issue 41: a bad_alloc from an outputs file used to leave it in /tmp). A worker
/// killed before that is Note [Program folder sweep]'s. Not copyable; not thread-safe.
class CellFolder {
 public:
  /// The folder of `cell_id` for this process in `temp` (the temporary directory); creates
  /// nothing.
  CellFolder(const std::filesystem::path& temp, const std::string& cell_id);
  ~CellFolder();
  CellFolder(const CellFolder&) = delete;
  CellFolder& operator=(const CellFolder&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace scalebench::program
