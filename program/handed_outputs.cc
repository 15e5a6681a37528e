#include "program/handed_outputs.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <system_error>

#include "common/cell/cell_outcome.h"

namespace scalebench::program {

/// The outputs the program handed (Note [Accuracy across cells]): the float32 file the client
/// wrote, whose size the `outputs` records announced. nullopt when it handed none. Throws
/// CellError (validation) for a file that does not hold what the records say.
std::optional<OutputArray> handed_outputs(const ProgramReport& report,
                                          const std::filesystem::path& file) {
  if (report.output_samples == 0) return std::nullopt;
  OutputArray outputs;
  outputs.shape.push_back(report.output_samples);
  outputs.shape.insert(outputs.shape.end(), report.output_sample_shape.begin(),
                       report.output_sample_shape.end());
  const auto expected = static_cast<uintmax_t>(outputs.element_count()) * sizeof(float);
  std::error_code error;
  const auto size = std::filesystem::file_size(file, error);
  if (error || size != expected) {
    throw CellError(FailurePhase::kValidation,
                    "the program's outputs file " + file.string() + " holds " +
                        (error ? std::string("nothing") : std::to_string(size) + " bytes") +
                        " but its outputs records announce " + shape_text(outputs.shape) +
                        " float32 values (" + std::to_string(expected) + " bytes)");
  }
  outputs.values.resize(static_cast<size_t>(outputs.element_count()));
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(outputs.values.data()), static_cast<std::streamsize>(expected));
  if (!in) {
    throw CellError(FailurePhase::kValidation,
                    "could not read the program's outputs file " + file.string());
  }
  return outputs;
}

}  // namespace scalebench::program
