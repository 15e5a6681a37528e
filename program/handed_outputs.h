// The outputs a program handed for accuracy validation (Note [Accuracy across cells]).
#pragma once

#include <filesystem>
#include <optional>

#include "common/cell/output_comparison.h"
#include "program/program_report.h"

namespace scalebench::program {

/// The outputs the program handed (Note [Accuracy across cells]): the float32 file the client
/// wrote, whose size the `outputs` records announced. nullopt when it handed none. Throws
/// CellError (validation) for a file that does not hold what the records say.
std::optional<OutputArray> handed_outputs(const ProgramReport& report,
                                          const std::filesystem::path& file);

}  // namespace scalebench::program
