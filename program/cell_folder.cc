#include "program/cell_folder.h"

#include <unistd.h>

#include <system_error>

#include "program/folder_sweep.h"

namespace scalebench::program {

CellFolder::CellFolder(const std::filesystem::path& temp, const std::string& cell_id)
    : path_(temp / (std::string(kCellFolderPrefix) + cell_id + "-" + std::to_string(::getpid()))) {}

CellFolder::~CellFolder() {
  std::error_code ignored;  // a destructor never throws; a folder that stays is swept later
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace scalebench::program
