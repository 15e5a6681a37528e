// What this build of scalebench is: version, commit, build type, and the paths it was
// configured with. Defined in the generated build/<preset>/generated/build_info.cc
// (common/base/build_info.cc.in), the only translation unit that holds the clone's paths.
#pragma once

#include <filesystem>

namespace scalebench::build_info {
extern const char* const kVersion;
extern const char* const kGitCommit;
extern const bool kGitDirty;
extern const char* const kBuildType;
/// SCALEBENCH_PYTHON at configure time (the project virtualenv's python), or "".
extern const char* const kPython;
/// The source tree this build was configured from (absolute).
extern const char* const kSourceDir;

/// The build folder this build was made in (absolute); its bin/ holds the executables
/// (scalebench, scalebench-supervisor).
extern const char* const kBinaryDir;

/// kSourceDir as a path.
inline std::filesystem::path source_dir() { return kSourceDir; }
}  // namespace scalebench::build_info
