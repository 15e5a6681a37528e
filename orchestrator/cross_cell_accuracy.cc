#include "orchestrator/cross_cell_accuracy.h"

#include <map>
#include <utility>

#include "common/base/error.h"
#include "common/base/logging.h"
#include "common/cell/accuracy.h"
#include "common/cell/output_comparison.h"

namespace scalebench {
namespace {

/// `cell` without what a baseline may differ in besides the rule's own fields: identity
/// bookkeeping, the validation settings, the repetition.
CellSpec comparable(CellSpec cell) {
  const CellSpec defaults;
  cell.cell_id.clear();
  cell.source.clear();
  cell.label_settings.clear();
  cell.validate = false;
  cell.tolerance = defaults.tolerance;
  cell.validation_samples = defaults.validation_samples;
  cell.repetition = 0;
  return cell;
}

/// The metric of the results file that holds scalebench_client.metric(name) (protocol/
/// program_cell.cc: `loss` is stored as final_loss, every other name with a program_ prefix).
std::string stored_metric_name(const std::string& name) {
  return name == "loss" ? "final_loss" : "program_" + name;
}

}  // namespace

bool compared_across_cells(const CellSpec& cell, const BaselineSpec& baseline) {
  if (!cell.validate) return false;
  if (!cell.program.command.empty()) return true;
  return !baseline.branch.empty() && !cell.model.torchscript.empty() && cell.mode == Mode::kInfer;
}

std::optional<CellSpec> baseline_cell(const CellSpec& cell, const std::vector<CellSpec>& cells,
                                      const BaselineSpec& baseline) {
  CellSpec wanted = baseline.branch.empty() ? reference_cell(cell) : cell;
  if (!baseline.branch.empty()) wanted.branch = baseline.branch;
  wanted = comparable(wanted);
  const CellSpec* found = nullptr;
  for (const auto& candidate : cells) {
    CellSpec shape = comparable(candidate);
    if (!baseline.branch.empty()) shape.commit = wanted.commit;  // its own branch's commit
    if (!(shape == wanted)) continue;
    if (candidate.repetition == cell.repetition) {
      found = &candidate;
      break;
    }
    if (candidate.repetition == 0) found = &candidate;
  }
  if (found == nullptr || found->cell_id == cell.cell_id) return std::nullopt;
  return *found;
}

std::string baseline_description(const CellSpec& baseline, const BaselineSpec& spec) {
  return "cell " + baseline.cell_id + ": " +
         (spec.branch.empty() ? "same branch in fp32 with every switch off"
                              : "branch " + spec.branch + ", same settings");
}

int compare_across_cells(const std::vector<CellSpec>& cells, const BaselineSpec& baseline,
                         ResultsStore& store) {
  std::vector<const CellSpec*> compared;
  for (const auto& cell : cells) {
    if (compared_across_cells(cell, baseline)) compared.push_back(&cell);
  }
  if (compared.empty()) return 0;
  const auto stored = store.cells();
  auto is_ok = [&](const std::string& id) {
    const auto it = stored.find(id);
    return it != stored.end() && it->second.status == CellStatus::kOk;
  };
  int written = 0;
  store.batch([&] {
    for (const CellSpec* cell : compared) {
      if (!is_ok(cell->cell_id)) continue;  // failed, or not run yet: nothing to compare
      const auto base = baseline_cell(*cell, cells, baseline);
      if (!base) {
        const bool is_baseline = baseline.branch.empty()
                                     ? comparable(reference_cell(*cell)) == comparable(*cell)
                                     : cell->branch == baseline.branch;
        if (!is_baseline) {
          store.record_not_compared(
              *cell, "validate: no baseline cell in this matrix (" +
                         (baseline.branch.empty()
                              ? std::string("the same cell in fp32 with every switch off")
                              : "the same cell on branch " + baseline.branch) +
                         "); add it to the matrix (docs/accuracy.md#across-cells)");
        }
        continue;
      }
      const auto it = stored.find(base->cell_id);
      if (it == stored.end()) continue;  // not run yet: the next --resume compares
      if (it->second.status != CellStatus::kOk) {
        store.record_not_compared(*cell, "validate: the baseline cell " + base->cell_id + " is " +
                                             to_string(it->second.status) + ", not ok");
        continue;
      }
      auto mine = store.validation(cell->cell_id);
      if (!mine.reference_cell.empty()) continue;  // compared by an earlier run
      auto theirs = store.validation(base->cell_id);
      CrossCellInputs inputs;
      inputs.outputs = std::move(mine.outputs);  // the arrays are large: moved, not copied
      inputs.baseline_outputs = std::move(theirs.outputs);
      for (const auto& ranks : {std::make_pair(&mine, &inputs.metrics),
                                std::make_pair(&theirs, &inputs.baseline_metrics)}) {
        for (const auto& rank : ranks.first->metrics) {
          std::map<std::string, double> named;
          for (const auto& name : baseline.metrics) {
            if (const auto m = rank.find(stored_metric_name(name)); m != rank.end()) {
              named[name] = m->second;
            }
          }
          ranks.second->push_back(std::move(named));
        }
      }
      inputs.metric_names = baseline.metrics;
      inputs.tolerance = cell->tolerance;
      inputs.reference = baseline_description(*base, baseline);
      try {
        AccuracyReport report = compare_with_baseline(inputs);
        if (mine.accuracy) {  // a built-in cell's own fp32 comparison stays in its verdict
          for (const auto& check : mine.accuracy->failed_checks) {
            report.failed_checks.push_back("fp32 reference: " + check);
          }
          if (mine.accuracy->verdict != "passed") report.verdict = "failed";
          report.reference += "; and its own fp32 reference: " + mine.accuracy->verdict;
        }
        store.record_cross_cell_accuracy(*cell, report, base->cell_id);
        SB_LOG(info) << "accuracy of " << cell->cell_id << " against " << base->cell_id << ": "
                     << accuracy_summary(report);
        ++written;
      } catch (const InputError& e) {
        store.record_not_compared(*cell, std::string("validate: ") + e.what());
      }
    }
  });
  return written;
}

}  // namespace scalebench
