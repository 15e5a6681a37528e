// Note [Accuracy across cells]: the plain-C++ comparison of handed outputs and metrics with a
// baseline cell's, and what the results store keeps of it. (The SSIM of output_sums is
// checked against the worker's Torch implementation in tests/unit/worker/accuracy_sums_test.)
#include "common/cell/output_comparison.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/base/error.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OutputArray ramp(std::vector<int64_t> shape, double shift = 0.0, uint32_t seed = 1) {
  OutputArray a;
  a.shape = std::move(shape);
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> noise(0.0F, 1.0F);
  a.values.resize(static_cast<size_t>(a.element_count()));
  for (auto& v : a.values) v = noise(random) + static_cast<float>(shift);
  return a;
}

CrossCellInputs pair_of(OutputArray cell, OutputArray baseline) {
  CrossCellInputs inputs;
  inputs.outputs = {std::move(cell)};
  inputs.baseline_outputs = {std::move(baseline)};
  inputs.reference = "cell abc: branch main, same settings";
  return inputs;
}

TEST(OutputComparison, IdenticalOutputsPassWithZeroErrorAndSsimOne) {
  const auto a = ramp({4, 1, 16, 16});
  const auto report = compare_with_baseline(pair_of(a, a));
  EXPECT_EQ(report.verdict, "passed");
  EXPECT_EQ(report.kind, "outputs");
  EXPECT_EQ(report.values.at("mae"), 0.0);
  EXPECT_DOUBLE_EQ(report.values.at("ssim"), 1.0);
  EXPECT_DOUBLE_EQ(report.values.at("cosine_similarity"), 1.0);
  EXPECT_EQ(report.values.at("validation_samples"), 4.0);
  EXPECT_EQ(report.reference, "cell abc: branch main, same settings");
}

TEST(OutputComparison, ShiftedOutputsFailNamingMaeRel) {
  const auto base = ramp({8, 10});
  auto shifted = base;
  for (auto& v : shifted.values) v += 0.5F;  // range of the baseline is ~1: mae_rel ~0.5
  const auto report = compare_with_baseline(pair_of(shifted, base));
  EXPECT_EQ(report.verdict, "failed");
  ASSERT_FALSE(report.failed_checks.empty());
  EXPECT_THAT(report.failed_checks[0], HasSubstr("mae_rel 0.5"));
  EXPECT_NEAR(report.values.at("mae"), 0.5, 1e-6);
  EXPECT_EQ(report.values.count("ssim"), 0U) << "no SSIM for [N, 10]";
}

TEST(OutputComparison, SumsAreExactOverRanks) {
  // Two ranks of [2, 3] equal one array of [4, 3]: sums add, maxima take the larger.
  const auto a = ramp({2, 3}, 0.0, 1);
  const auto b = ramp({2, 3}, 0.0, 2);
  const auto a2 = ramp({2, 3}, 0.1, 3);
  const auto b2 = ramp({2, 3}, 0.1, 4);
  CrossCellInputs split;
  split.outputs = {a, b};
  split.baseline_outputs = {a2, b2};
  OutputArray whole_out{{4, 3}, a.values};
  whole_out.values.insert(whole_out.values.end(), b.values.begin(), b.values.end());
  OutputArray whole_ref{{4, 3}, a2.values};
  whole_ref.values.insert(whole_ref.values.end(), b2.values.begin(), b2.values.end());
  const auto by_ranks = compare_with_baseline(split);
  const auto at_once = compare_with_baseline(pair_of(whole_out, whole_ref));
  for (const char* name : {"mae", "mse", "max_abs_error", "cosine_similarity", "mae_rel"}) {
    EXPECT_NEAR(by_ranks.values.at(name), at_once.values.at(name), 1e-12) << name;
  }
}

TEST(OutputComparison, ADifferentShapeOrMissingOutputsFailNamingTheRank) {
  auto inputs = pair_of(ramp({4, 3}), ramp({4, 2}));
  auto report = compare_with_baseline(inputs);
  EXPECT_EQ(report.verdict, "failed");
  EXPECT_THAT(report.failed_checks,
              testing::Contains(HasSubstr("rank 0: output shape [4, 3] differs from the "
                                          "baseline's [4, 2]")));
  inputs = pair_of(OutputArray{}, ramp({4, 2}));
  report = compare_with_baseline(inputs);
  EXPECT_THAT(report.failed_checks, testing::Contains(HasSubstr("rank 0: no outputs")));
}

TEST(OutputComparison, NamedMetricsAreComparedByRelativeChange) {
  CrossCellInputs inputs;
  inputs.metric_names = {"val_loss"};
  inputs.metrics = {{{"val_loss", 1.005}}, {{"val_loss", 2.0}}};
  inputs.baseline_metrics = {{{"val_loss", 1.0}}, {{"val_loss", 2.0}}};
  auto report = compare_with_baseline(inputs);
  EXPECT_EQ(report.kind, "metrics");
  EXPECT_EQ(report.verdict, "passed");
  EXPECT_NEAR(report.values.at("metric_rel_change.val_loss"), 0.005, 1e-12);
  inputs.metrics[1]["val_loss"] = 2.1;
  report = compare_with_baseline(inputs);
  EXPECT_EQ(report.verdict, "failed");
  EXPECT_THAT(report.failed_checks, ElementsAre(HasSubstr("metric val_loss rel. change 0.05")));
  inputs.metrics[1].clear();
  report = compare_with_baseline(inputs);
  EXPECT_THAT(report.failed_checks, ElementsAre("metric val_loss: rank 1 did not report it"));
}

TEST(OutputComparison, NothingToCompareIsAnInputError) {
  CrossCellInputs inputs;
  inputs.outputs = {OutputArray{}};
  inputs.baseline_outputs = {OutputArray{}};
  EXPECT_THROW(compare_with_baseline(inputs), InputError);
}

TEST(OutputComparison, TheStoreKeepsOutputsAndRecordsTheComparison) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("h"), false);
  const CellSpec cell = testing_util::train_cell(1);
  auto ranks = testing_util::full_results(cell);
  ranks[1].validation_outputs = ramp({2, 5});
  store.mark_running(cell, {1, 2});
  store.complete_cell(cell, ranks);
  const auto stored = store.validation(cell.cell_id);
  ASSERT_EQ(stored.outputs.size(), 2U);
  EXPECT_TRUE(stored.outputs[0].values.empty());
  EXPECT_EQ(stored.outputs[1], *ranks[1].validation_outputs);
  EXPECT_EQ(stored.metrics[1].at("final_loss"), ranks[1].metrics.at("final_loss"));
  EXPECT_TRUE(store.validation("no-such-cell").outputs.empty());

  const auto report = compare_with_baseline(pair_of(ramp({2, 5}), ramp({2, 5})));
  store.record_cross_cell_accuracy(cell, report, "fedcba9876543210");
  const auto h5 = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const auto group = own_group(
      HDF5_CHECK(H5Gopen2(h5, ("cells/" + cell.cell_id + "/accuracy").c_str(), H5P_DEFAULT)));
  EXPECT_EQ(h5::read_string_attribute(group, "reference_cell"), "fedcba9876543210");
  EXPECT_EQ(h5::read_string_attribute(group, "verdict"), "passed");
}

TEST(OutputComparison, ACellNotComparedSaysWhyAmongItsIneffectiveReasons) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("h"), false);
  const CellSpec cell = testing_util::train_cell(1);
  store.mark_running(cell, {1, 2});
  store.complete_cell(cell, testing_util::full_results(cell));
  store.record_not_compared(cell, "validate: the baseline cell x is failed, not ok");
  store.record_not_compared(cell, "validate: the baseline cell x is failed, not ok");
  const auto h5 = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const auto group =
      own_group(HDF5_CHECK(H5Gopen2(h5, ("cells/" + cell.cell_id).c_str(), H5P_DEFAULT)));
  EXPECT_EQ(h5::read_string_attribute(group, "effective_validate"), "false");
  EXPECT_EQ(h5::read_string_attribute(group, "ineffective_reasons"),
            R"(["validate: the baseline cell x is failed, not ok"])");
}

}  // namespace
}  // namespace scalebench
