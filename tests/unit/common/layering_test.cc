// The floors of docs/architecture.md, checked on the sources: common -> protocol ->
// {worker, orchestrator} -> app. A file includes only its own folder and the floors below
// it, and Torch/CUDA/NCCL headers appear only under worker/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/build_info.h"

namespace {

const std::filesystem::path kSource(scalebench::build_info::source_dir());

/// The project folders each folder may include.
const std::map<std::string, std::set<std::string>> kAllowed{
    {"common", {"common"}},
    {"protocol", {"common", "protocol"}},
    {"orchestrator", {"common", "protocol", "orchestrator"}},
    {"worker", {"common", "protocol", "worker"}},
    {"app", {"common", "protocol", "orchestrator", "worker", "app"}},
};

bool is_source(const std::filesystem::path& path) {
  const auto extension = path.extension().string();
  return extension == ".h" || extension == ".cc";
}

TEST(Layering, EachFolderIncludesOnlyTheFloorsBelowIt) {
  const std::regex project_include(R"re(^\s*#\s*include\s+"([a-z_]+)/)re");
  const std::regex torch_include(R"re(^\s*#\s*include\s+<(torch|ATen|c10|cuda|nccl)[/._])re");
  size_t files = 0;
  for (const auto& [folder, allowed] : kAllowed) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kSource / folder)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        std::smatch match;
        const std::string where = entry.path().string() + ":" + std::to_string(number);
        if (std::regex_search(line, match, project_include) &&
            kAllowed.count(match[1].str()) != 0) {
          EXPECT_TRUE(allowed.count(match[1].str()) != 0)
              << where << " includes " << match[1] << "/ (" << folder << "/ may include only "
              << "the floors below it)";
        }
        if (folder != "worker" && folder != "app") {
          EXPECT_FALSE(std::regex_search(line, torch_include))
              << where << ": Torch/CUDA headers belong under worker/ only";
        }
      }
    }
  }
  EXPECT_GT(files, 100U) << "the source tree was not found under " << kSource;
}

}  // namespace
