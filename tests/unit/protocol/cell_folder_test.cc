// A program cell's folder has one owner, which removes it on every way out (issue 41 item 6).
#include "program/cell_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "program/folder_sweep.h"

namespace scalebench::program {
namespace {

TEST(ProgramCellFolder, IsRemovedWhenTheCellReturnsOrThrows) {
  const auto temp = std::filesystem::path(::testing::TempDir()) / "cell_folder_test";
  std::filesystem::create_directories(temp);
  std::filesystem::path made;
  try {
    const CellFolder folder(temp, "0123abcd");
    made = folder.path();
    // The name Note [Program folder sweep] reads: this process is its owner.
    EXPECT_EQ(cell_folder_owner(made.filename().string()), ::getpid());
    std::filesystem::create_directories(made / "rank0");
    std::ofstream(made / "rank0" / "validation_outputs.f32") << "1234";
    throw std::length_error("vector::_M_default_append");  // what an outputs record once did
  } catch (const std::length_error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(made)) << made;
  {
    const CellFolder never_made(temp, "feedface");  // nothing to remove: no error either
  }
  std::filesystem::remove_all(temp);
}

}  // namespace
}  // namespace scalebench::program
