// Rank 0's comparison of validating program cells with their baseline cells once both are
// in the results file (Note [Accuracy across cells] in common/cell/output_comparison.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "matrix/matrix.h"
#include "results/store.h"

namespace scalebench {

/// Whether `cell` is compared across cells: a program cell with `validate: true`, and with
/// a baseline branch also a TorchScript inference cell with `validate: true` (the user's
/// model, which a branch may change; its comparison with its own fp32 reference stays part
/// of its verdict).
bool compared_across_cells(const CellSpec& cell, const BaselineSpec& baseline);

/// The baseline cell of `cell` among `cells`: the one that differs only in its branch and
/// commit (baseline.branch set) or only in the switches reference_cell turns off (baseline
/// `reference`), ignoring the validation settings (validate, tolerance, validation_samples);
/// of several repetitions the same repetition, else repetition 0. nullopt when there is none,
/// and when that cell is `cell` itself (a cell is not compared with itself). Pure.
std::optional<CellSpec> baseline_cell(const CellSpec& cell, const std::vector<CellSpec>& cells,
                                      const BaselineSpec& baseline);

/// The baseline in words for the stored `reference`: "cell 0123...: branch main" or
/// "cell 0123...: same branch in fp32 with every switch off".
std::string baseline_description(const CellSpec& baseline, const BaselineSpec& spec);

/// Compares every cell of `cells` that compared_across_cells with its baseline, where `store`
/// holds both as ok: records the report (record_cross_cell_accuracy), or the reason it could
/// not (no baseline cell in the matrix, the baseline not ok, nothing handed) with
/// record_not_compared. One update of the file. Cells not yet stored (an interrupted run) are
/// left for the next --resume, cells already compared with their baseline are not compared
/// again. Returns the number of reports written.
int compare_across_cells(const std::vector<CellSpec>& cells, const BaselineSpec& baseline,
                         ResultsStore& store);

}  // namespace scalebench
