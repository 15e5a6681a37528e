// `scalebench validate` (through run_cli, in process) warns when the matrix has AOTInductor
// cells and the build's LibTorch has no package loader (WorkerFactory::aoti_loader_available),
// and says nothing when it has one or when the matrix has no such cells.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "orchestrator/cli.h"
#include "tests/unit/orchestrator/captured_cli.h"

namespace scalebench {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

/// `scalebench validate <matrix>` with `worker`; stderr unwrapped (the warning is wrapped at
/// 100 columns: one line again).
testing::CliResult validate(const std::filesystem::path& matrix, const WorkerFactory& worker) {
  auto result = testing::run_captured({"validate", matrix.string()}, worker);
  for (size_t at = result.err.find("\n  "); at != std::string::npos;
       at = result.err.find("\n  ", at)) {
    result.err.replace(at, 3, " ");
  }
  return result;
}

TEST(ValidateAotiLoader, AoTiCellsWithoutALoaderAreNamedAndTheFileStaysValid) {
  const auto dir = std::filesystem::temp_directory_path() / "scalebench-validate-aoti";
  std::filesystem::create_directories(dir);
  const auto with_aoti = dir / "aoti.yaml";
  std::ofstream(with_aoti) << "name: a\n"
                              "sweep: {modes: [infer], batch_sizes: [4, 8]}\n"
                              "experiments:\n"
                              "  - {name: packaged, model: {aoti: net.pt2}, input_shape: [3]}\n"
                              "  - {name: zoo, model: mlp}\n"
                              "  - {name: compiled, model: mlp, compile: [eager, aoti]}\n";
  const auto zoo_only = dir / "zoo.yaml";
  std::ofstream(zoo_only) << "name: z\nexperiments:\n  - {name: zoo, model: mlp}\n";

  WorkerFactory without;
  without.aoti_loader_available = [] { return false; };
  without.library_versions = [] { return std::map<std::string, std::string>{{"torch", "2.5.1"}}; };
  const auto refused = validate(with_aoti, without);
  EXPECT_EQ(refused.status, 0) << refused.err;
  EXPECT_THAT(refused.out, HasSubstr("OK, 8 cells"));
  EXPECT_THAT(refused.err,
              AllOf(HasSubstr("LibTorch 2.5.1 has no AOTInductor package loader"),
                    HasSubstr("the 4 cell(s) with model {aoti: ...} or compile: aoti (experiment "
                              "compiled, packaged)"),
                    HasSubstr("--torchscript")));
  EXPECT_THAT(validate(zoo_only, without).err, Not(HasSubstr("AOTInductor")));

  WorkerFactory with;
  with.aoti_loader_available = [] { return true; };
  EXPECT_THAT(validate(with_aoti, with).err, Not(HasSubstr("AOTInductor")));
  EXPECT_THAT(validate(with_aoti, WorkerFactory{}).err, Not(HasSubstr("AOTInductor")))
      << "unknown (no worker library): no warning";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scalebench
