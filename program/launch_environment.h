// The launch contract of docs/programs.md: a program cell's command with its placeholders
// filled and the environment its program sees (torchrun's variables, SCALEBENCH_*, the
// experiment's `env`; the launcher's own variables scrubbed). See Note [Program cells].
#pragma once

#include <filesystem>
#include <string>

#include "common/base/subprocess.h"
#include "common/cell/messages.h"
#include "program/torchrun_layout.h"
#include "protocol/cell_runner.h"

namespace scalebench::program {

/// The float32 file of handed outputs, in the rank's output folder (SCALEBENCH_OUTPUTS_FILE).
inline constexpr const char* kOutputsFile = "validation_outputs.f32";

/// The command with its placeholders filled, and its environment: the launch contract of
/// docs/programs.md, then the experiment's `env`; run under scalebench-supervisor where it is
/// found (Note [Program supervisor]), which removes output_dir's parent (the cell's folder)
/// if this rank dies first. Throws std::invalid_argument for a placeholder that cannot be
/// filled.
SubprocessOptions launch_options(const Assignment& assignment, const TorchrunLayout& layout,
                                 const WorkerContext& context, const std::string& device,
                                 const std::filesystem::path& output_dir, double budget_bytes);

}  // namespace scalebench::program
