// Issue 39 item 3: the repetitions of a program cell form one series after a round trip
// through the results file, although its stored spec lacks an env value (Note [Stored program
// environment]): the series id is stored beside the spec (layout 1.9), not computed again.
#include <gtest/gtest.h>

#include <string>

#include "common/cell/cell_spec.h"
#include "results/cells.h"
#include "results/overview.h"
#include "results/reader.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

CellSpec repeated_program_cell(int64_t repetition) {
  CellSpec cell = testing_util::train_cell(7, 1, 1, 5);
  cell.model.zoo.clear();
  cell.program.command = {"python3", "steps.py", "{steps}"};
  cell.program.env = {{"PYTHONPATH", "."}, {"HF_TOKEN", "hf_secret"}};
  cell.repetitions = 3;
  cell.repetition = repetition;
  return finalize_cell_id(cell);
}

TEST(ProgramSeries, RepetitionsOfAProgramCellWithAnUnstoredEnvValueFormOneSeries) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  {
    auto store =
        ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
    for (int64_t k = 0; k < 3; ++k) {
      const CellSpec cell = repeated_program_cell(k);
      store.mark_running(cell, {1});
      store.complete_cell(cell, testing_util::full_results(cell));
    }
  }
  const auto overview = read_results_overview(path);
  const std::string first = repeated_program_cell(0).cell_id;
  for (int64_t k = 0; k < 3; ++k) {
    const auto& cell = overview.at("cells").at(repeated_program_cell(k).cell_id);
    EXPECT_EQ(cell.at(results::kSeriesIdAttribute), first) << "repetition " << k;
    const auto& env = cell.at("spec").at("program").at("env");
    EXPECT_EQ(env.at("PYTHONPATH"), ".");  // a path: stored
    EXPECT_EQ(env.at("HF_TOKEN"), results::kNotStoredValue);
    // What split the series: the id computed again from the stored spec is another.
    if (k > 0) {
      EXPECT_NE(series_id(cell_spec_from_json(cell.at("spec"))), first);
    }
  }
  const auto series = series_of_overview(overview);
  ASSERT_EQ(series.size(), 1U);
  EXPECT_EQ(series.front().series_id, first);
  EXPECT_EQ(series.front().cells.size(), 3U);
  EXPECT_EQ(series.front().completed, 3);
}

// Note [Program steps asked and run]: the ranks' untrusted reasons are stored once each, and a
// retry of the cell (mark_running again, --resume) drops them with its other results.
TEST(ProgramSeries, UntrustedReasonsAreStoredAndARetryDropsThem) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
  const CellSpec cell = repeated_program_cell(0);
  auto ranks = testing_util::full_results(cell);
  for (auto& rank : ranks) rank.untrusted_reasons = {"steps: the program ran 3 steps"};
  store.mark_running(cell, {1});
  store.complete_cell(cell, ranks);
  const auto stored = read_results_overview(path).at("cells").at(cell.cell_id);
  EXPECT_EQ(stored.at(results::kUntrustedReasons),
            nlohmann::json::array({"steps: the program ran 3 steps"}));
  store.mark_running(cell, {1});
  store.complete_cell(cell, testing_util::full_results(cell));
  EXPECT_FALSE(read_results_overview(path)
                   .at("cells")
                   .at(cell.cell_id)
                   .contains(results::kUntrustedReasons));
}

}  // namespace
}  // namespace scalebench
