// The floors of docs/architecture.md, checked on the sources and on the CMake files:
//   common/{base -> hdf5, cell} -> {matrix, results, program/preflight} -> protocol
//     -> program -> {worker, orchestrator} -> app
// common/ holds only what both sides use; rank 0's own libraries (matrix/, results/,
// program/preflight/) and the workers' (program/, worker/) sit in folders named for them.
// A library's files include only its own folder and the libraries its row allows, its CMake
// target links only those, and Torch/CUDA/NCCL headers appear only under worker/ and app/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/base/build_info.h"

namespace {

const std::filesystem::path kSource(scalebench::build_info::source_dir());

/// The one table: each library (by folder) and the libraries it may use, itself included.
/// A CMake target is `scalebench_<last part of the folder>`.
const std::map<std::string, std::set<std::string>> kAllowed{
    {"common/base", {"common/base"}},
    {"common/hdf5", {"common/base", "common/hdf5"}},
    {"common/cell", {"common/base", "common/cell"}},
    {"matrix", {"common/base", "common/cell", "matrix"}},
    {"results", {"common/base", "common/hdf5", "common/cell", "results"}},
    {"protocol", {"common/base", "common/cell", "protocol"}},
    {"program", {"common/base", "common/cell", "protocol", "program"}},
    {"program/preflight", {"common/base", "common/cell", "program/preflight"}},
    {"orchestrator",
     {"common/base", "common/hdf5", "common/cell", "matrix", "results", "program/preflight",
      "protocol", "orchestrator"}},
    {"worker", {"common/base", "common/hdf5", "common/cell", "protocol", "worker"}},
    {"app",
     {"common/base", "common/hdf5", "common/cell", "matrix", "results", "protocol", "program",
      "program/preflight", "orchestrator", "worker", "app"}},
};

std::string target_of(const std::string& folder) {
  return "scalebench_" + folder.substr(folder.rfind('/') + 1);
}

/// The library a file or a quoted include belongs to ("common/cell/spec.h" -> "common/cell";
/// "program/preflight/program_preflight.h" -> "program/preflight", the longest folder of the table
/// that holds it), or "".
std::string library_of_include(const std::string& path) {
  std::string library;
  for (const auto& [folder, allowed] : kAllowed) {
    if (path.rfind(folder + "/", 0) == 0 && folder.size() > library.size()) library = folder;
  }
  return library;
}

bool is_source(const std::filesystem::path& path) {
  const auto extension = path.extension().string();
  return extension == ".h" || extension == ".cc" || extension == ".in";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Layering, EachLibraryIncludesOnlyItsAllowedLibraries) {
  const std::regex project_include(R"re(^\s*#\s*include\s+"([a-z_0-9/]+\.h)")re");
  const std::regex torch_include(R"re(^\s*#\s*include\s+<(torch|ATen|c10|cuda|nccl)[/._])re");
  size_t files = 0;
  for (const auto& [folder, allowed] : kAllowed) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(kSource / folder)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      // A folder of the table inside another (program/preflight in program) is its own row.
      const auto relative = entry.path().lexically_relative(kSource).generic_string();
      if (library_of_include(relative) != folder) continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      int number = 0;
      while (std::getline(in, line)) {
        ++number;
        std::smatch match;
        const std::string where = entry.path().string() + ":" + std::to_string(number);
        if (std::regex_search(line, match, project_include)) {
          const std::string library = library_of_include(match[1].str());
          EXPECT_FALSE(library.empty() && match[1].str().rfind("common/", 0) == 0)
              << where << " includes " << match[1] << ", which is in no library of the table";
          if (!library.empty()) {
            EXPECT_TRUE(allowed.count(library) != 0)
                << where << " includes " << match[1] << " (" << folder
                << "/ may use only its row of the table in tests/unit/common/layering_test.cc)";
          }
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

TEST(Layering, EachLibraryLinksOnlyItsAllowedLibraries) {
  // The scalebench_* targets named in the link calls of the library's CMake file:
  // target_link_libraries(scalebench_x ...) and common/'s scalebench_common_library(x ...).
  const std::regex link_call(
      R"re((target_link_libraries\s*\(\s*(scalebench_[a-z_0-9]+)|scalebench_common_library\s*\(\s*([a-z_0-9]+))([^)]*)\))re");
  const std::regex project_target(R"re(\bscalebench_[a-z_0-9]+\b)re");
  std::map<std::string, std::string> folder_of_target;
  for (const auto& [folder, allowed] : kAllowed) folder_of_target[target_of(folder)] = folder;
  folder_of_target["scalebench"] = "app";
  size_t links_checked = 0;
  for (const std::string cmake_dir : {"common", "matrix", "results", "protocol", "program",
                                      "program/preflight", "orchestrator", "worker", "app"}) {
    const std::string text = read_file(kSource / cmake_dir / "CMakeLists.txt");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link_call);
         it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[2].matched ? (*it)[2].str() : "scalebench_" + (*it)[3].str();
      ASSERT_TRUE(folder_of_target.count(target) != 0)
          << cmake_dir << "/CMakeLists.txt links " << target << ", a target not in the table";
      const auto& allowed = kAllowed.at(folder_of_target.at(target));
      const std::string links = (*it)[4].str();
      for (auto dep = std::sregex_iterator(links.begin(), links.end(), project_target);
           dep != std::sregex_iterator(); ++dep) {
        ++links_checked;
        const std::string name = dep->str();
        ASSERT_TRUE(folder_of_target.count(name) != 0) << target << " links unknown " << name;
        EXPECT_TRUE(allowed.count(folder_of_target.at(name)) != 0)
            << cmake_dir << "/CMakeLists.txt: " << target << " links " << name
            << ", outside its row of the table in tests/unit/common/layering_test.cc";
      }
    }
  }
  EXPECT_GE(links_checked, 12U) << "the link calls of the CMake files were not found";
}

TEST(Layering, EveryCommonFileBelongsToALibrary) {
  for (const auto& entry : std::filesystem::directory_iterator(kSource / "common")) {
    EXPECT_TRUE(entry.is_directory() || entry.path().filename() == "CMakeLists.txt")
        << entry.path() << ": common/ holds only its libraries' folders";
  }
}

}  // namespace
