// Matrix loading: format dispatch, the pipeline (text checks -> reader -> expansion) and
// the summary line. See matrix/matrix.h.
#include "matrix/matrix.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>

#include "common/base/diagnostics.h"
#include "matrix/branch_resolution.h"
#include "matrix/request.h"
#include "matrix/text.h"

namespace scalebench {
namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  for (auto& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

/// Distinct values of `member` over `cells`, sorted, joined with commas.
template <typename T, typename Format>
std::string distinct(const std::vector<CellSpec>& cells, T CellSpec::*member, Format format) {
  std::set<T> values;
  for (const auto& cell : cells) values.insert(cell.*member);
  std::vector<std::string> texts;
  texts.reserve(values.size());
  for (const auto& value : values) texts.push_back(format(value));
  return join(texts, ",");
}

}  // namespace

ExpandedMatrix load_matrix(const std::filesystem::path& path, const MatrixLimits& limits) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw MatrixError(path.string() + ": no such matrix file; check the path");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw MatrixError(path.string() + ": cannot read the matrix file; check its permissions");
  // One byte past the limit is enough for load_matrix_text to refuse the file (Note [Input
  // limits]) without reading all of a huge one.
  std::string text(kMaxMatrixFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad())
    throw MatrixError(path.string() + ": cannot read the matrix file; check its permissions");
  return load_matrix_text(path, text, limits);
}

ExpandedMatrix load_matrix_text(const std::filesystem::path& path, const std::string& text,
                                const MatrixLimits& limits) {
  ExpandedMatrix matrix;
  matrix.path = path;
  matrix.text = text;
  const std::string file = path.string();
  const std::string extension = lower_extension(path);
  Diagnostics diagnostics;
  MatrixRequest request;
  if (extension != ".yaml" && extension != ".yml" && extension != ".csv") {
    throw MatrixError(file + ": unknown matrix format '" + extension +
                      "'; use a .yaml/.yml matrix or a CytoDL .csv task file");
  }
  if (check_text_encoding(text, file, diagnostics)) {
    if (extension == ".csv") {
      request = read_cytodl_csv(text, file, matrix.format, diagnostics);
    } else {
      matrix.format = "yaml";
      request = read_yaml_matrix(text, file, diagnostics);
    }
  }
  if (!diagnostics.has_errors()) matrix.cells = expand_matrix(request, limits, {}, diagnostics);
  const bool has_tree_experiments =
      std::any_of(request.experiments.begin(), request.experiments.end(),
                  [](const ExperimentRequest& e) { return !e.tree_name.empty(); });
  if (!diagnostics.has_errors() && matrix.cells.empty() && !has_tree_experiments) {
    diagnostics.error({file, 0, 0, ""}, "the matrix expands to no cells; check the exclude rules");
  }
  if (diagnostics.has_errors()) {
    if (matrix.format == "yaml") add_ref_errors_beside_file_errors(path, text, diagnostics);
    std::string message = diagnostics.error_text();
    for (const auto& warning : diagnostics.warning_lines()) message += "\n" + warning;
    throw MatrixError(message);
  }
  matrix.name = request.name.empty() ? path.stem().string() : request.name;
  matrix.repo = request.repo;
  matrix.branches = request.branches;
  matrix.branch_where = request.branch_where;
  matrix.scheduling = request.scheduling;
  matrix.baseline = request.baseline;
  matrix.prepare.argv = request.prepare_argv.value.value_or(std::vector<std::string>{});
  matrix.prepare.timeout_s = request.prepare_timeout_s.value.value_or(matrix.prepare.timeout_s);
  for (const auto& experiment : request.experiments) {
    if (!experiment.tree_name.empty()) {
      matrix.tree_experiments.push_back(experiment.tree_name);
      continue;  // its prepare step is known once its file is read
    }
    if (!experiment.prepare_argv.value && !experiment.prepare_timeout_s.value) continue;
    PrepareSpec own = matrix.prepare;
    if (experiment.prepare_argv.value) own.argv = *experiment.prepare_argv.value;
    if (experiment.prepare_timeout_s.value) own.timeout_s = *experiment.prepare_timeout_s.value;
    matrix.experiment_prepare[experiment.name] = own;
  }
  matrix.warnings = diagnostics.warning_lines();
  matrix.limits = limits;
  matrix.request = std::make_shared<const MatrixRequest>(std::move(request));
  return matrix;
}

const PrepareSpec& prepare_of(const ExpandedMatrix& matrix, const CellSpec& cell) {
  const auto it = matrix.experiment_prepare.find(cell.experiment);
  return it == matrix.experiment_prepare.end() ? matrix.prepare : it->second;
}

std::string summarize(const ExpandedMatrix& matrix) {
  const auto& cells = matrix.cells;
  std::set<std::string> experiments;
  for (const auto& cell : cells) experiments.insert(cell.experiment);
  const auto number = [](auto value) { return std::to_string(value); };
  const auto name = [](auto value) { return to_string(value); };
  std::string text = std::to_string(cells.size()) + " cells (" +
                     std::to_string(experiments.size()) +
                     (experiments.size() == 1 ? " experiment" : " experiments");
  if (!matrix.branches.empty()) text += ", branches " + join(matrix.branches, ",");
  if (!cells.empty()) {
    text += ", modes " + distinct(cells, &CellSpec::mode, name) + ", batch sizes " +
            distinct(cells, &CellSpec::batch_size, batch_text) + ", world sizes " +
            distinct(cells, &CellSpec::world_size, number) + ", precisions " +
            distinct(cells, &CellSpec::precision, name);
  }
  text += "; format " + matrix.format + ")";
  if (!matrix.tree_experiments.empty() && !matrix.tree_experiments_resolved) {
    const size_t count = matrix.tree_experiments.size();
    text += ", plus " + std::to_string(count) + (count == 1 ? " experiment" : " experiments") +
            " from the branch trees (" + join(matrix.tree_experiments, ",") +
            ": configs/experiment/<name>.yaml of each branch), expanded by plan and run";
  }
  return text;
}

}  // namespace scalebench
