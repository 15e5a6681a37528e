// Matrix loading: see common/matrix.h. Format dispatch, YAML expansion.
#include "common/matrix.h"

#include <fstream>
#include <sstream>

namespace scalebench {

ExpandedMatrix load_matrix(const std::filesystem::path& path, const MatrixLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw MatrixError(path.string() + ": cannot open the matrix file; check the path");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_matrix_text(path, text.str(), limits);
}

ExpandedMatrix load_matrix_text(const std::filesystem::path& path, const std::string&,
                                const MatrixLimits&) {
  throw MatrixError(path.string() + ": matrix loading is being implemented (issue Foundation 4)");
}

std::string summarize(const ExpandedMatrix& matrix) {
  return std::to_string(matrix.cells.size()) + " cells";
}

}  // namespace scalebench
