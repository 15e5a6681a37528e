// Progress/ETA, the end-of-run table, `info` JSON, and the pure rules of the rank-0 loop.
#include <gtest/gtest.h>

#include <cmath>

#include "common/cell/cell_spec.h"
#include "matrix/matrix.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/progress.h"
#include "orchestrator/summary_table.h"

namespace scalebench {
namespace {

TEST(EstimateEta, ScalesElapsedByRemainingCells) {
  EXPECT_EQ(estimate_eta_s(10.0, 0, 5), std::nullopt);
  EXPECT_DOUBLE_EQ(*estimate_eta_s(10.0, 2, 5), 25.0);
  EXPECT_DOUBLE_EQ(*estimate_eta_s(10.0, 0, 0), 0.0);
}

TEST(FormatDuration, HoursMinutesSeconds) {
  EXPECT_EQ(format_duration(0.4), "0s");
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-3), "0s");
}

TEST(Progress, CountsDoneFailedAndResumedCells) {
  const auto start = Progress::Clock::now();
  Progress progress(10, 3, start);
  EXPECT_EQ(progress.line(start), "[ 3/10 done, 0 failed] ETA ?");
  progress.cell_finished(CellStatus::kOk);
  progress.cell_finished(CellStatus::kOom);
  progress.cell_finished(CellStatus::kSkipped);
  EXPECT_EQ(progress.done(), 6u);
  EXPECT_EQ(progress.failed(), 1u);
  // 3 cells in 30 s, 4 left -> 40 s.
  EXPECT_EQ(progress.line(start + std::chrono::seconds(30)), "[ 6/10 done, 1 failed] ETA 40s");
}

RankResult rank(int world_rank, CellStatus status, const std::string& reason = "") {
  RankResult result;
  result.world_rank = world_rank;
  result.status = status;
  result.failed_phase = status == CellStatus::kOk ? FailurePhase::kNone : FailurePhase::kForward;
  result.reason = reason;
  return result;
}

TEST(CellOutcome, FirstNonOkRankDecides) {
  EXPECT_EQ(cell_outcome({rank(1, CellStatus::kOk), rank(2, CellStatus::kOk)}).status,
            CellStatus::kOk);
  const auto outcome = cell_outcome({rank(1, CellStatus::kOk), rank(2, CellStatus::kOom, "CUDA"),
                                     rank(3, CellStatus::kFailed, "x")});
  EXPECT_EQ(outcome.status, CellStatus::kOom);
  EXPECT_EQ(outcome.failed_phase, FailurePhase::kForward);
  EXPECT_EQ(outcome.reason, "rank 2: CUDA");
}

TEST(CellOutcome, TheRankThatFailedDecidesNotItsGroupEcho) {
  RankResult echo = rank(1, CellStatus::kFailed, "another rank of the group failed");
  echo.failed_phase = FailurePhase::kGroup;
  const auto outcome =
      cell_outcome({echo, rank(2, CellStatus::kOom, "CUDA"), rank(3, CellStatus::kOk)});
  EXPECT_EQ(outcome.status, CellStatus::kOom);
  EXPECT_EQ(outcome.failed_phase, FailurePhase::kForward);
  EXPECT_EQ(outcome.reason, "rank 2: CUDA");
  EXPECT_EQ(cell_outcome({echo, rank(3, CellStatus::kOk)}).failed_phase, FailurePhase::kGroup);
}

TEST(ShouldRunOnResume, TableOfStoredStatuses) {
  struct Case {
    std::optional<CellStatus> stored;
    bool retry_failed;
    bool run;
  };
  const std::vector<Case> cases{
      {std::nullopt, false, true},
      {CellStatus::kOk, false, false},
      {CellStatus::kOk, true, false},
      {CellStatus::kFailed, false, false},
      {CellStatus::kFailed, true, true},
      {CellStatus::kOom, false, false},
      {CellStatus::kOom, true, true},
      {CellStatus::kTimeout, false, false},
      {CellStatus::kTimeout, true, true},
      {CellStatus::kRunning, false, true},
      {CellStatus::kInterrupted, false, true},
      {CellStatus::kSkipped, false, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(should_run_on_resume(c.stored, c.retry_failed), c.run)
        << (c.stored ? to_string(*c.stored) : "absent") << " retry=" << c.retry_failed;
  }
}

nlohmann::json overview_fixture() {
  return nlohmann::json::parse(R"({
    "provenance": {"tool_version": "0.1.0", "mpi_size": 3},
    "cells": {
      "bbbb": {"spec": {"branch": "main", "experiment": "mlp-train", "mode": "train",
                        "batch_size": 16, "world_size": 2},
               "status": "ok", "reason": "", "failed_phase": "",
               "effective_tf32": "false", "effective_cpu_threads": "2",
               "ineffective_reasons": ["tf32: TF32 is a mode of CUDA tensor cores"],
               "summary": {"metric": "step", "median_s": 0.0125,
                           "throughput_samples_per_s": 2560.0, "valid": 1},
               "accuracy": {"verdict": "failed", "kind": "training",
                            "failed_checks": ["param_rel_distance 0.03 > 0.01"]}},
      "aaaa": {"spec": "{\"branch\": \"\", \"experiment\": \"bad\", \"mode\": \"infer\", \"batch_size\": 8, \"world_size\": 1}",
               "status": "failed", "reason": "shape mismatch", "failed_phase": "forward"}
    }})");
}

TEST(SummaryRows, ReadsSpecsStatusesAndSummaries) {
  const auto rows = summary_rows(overview_fixture());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].cell_id, "aaaa");
  EXPECT_EQ(rows[0].experiment, "bad");
  EXPECT_EQ(rows[0].batch_size, 8);
  EXPECT_TRUE(std::isnan(rows[0].median_s));
  EXPECT_FALSE(rows[0].valid.has_value());
  EXPECT_EQ(rows[1].branch, "main");
  EXPECT_DOUBLE_EQ(rows[1].median_s, 0.0125);
  EXPECT_EQ(rows[1].valid, true);
  EXPECT_EQ(status_counts(rows), (std::map<std::string, size_t>{{"failed", 1}, {"ok", 1}}));
}

TEST(FormatSummaryTable, NcclTestsStyle) {
  const std::string table = format_summary_table(summary_rows(overview_fixture()));
  const std::string expected =
      "#  branch  experiment   mode  batch  world  metric  median  samples  trusted"
      "                             accuracy  status\n"
      "#                                                     (ms)     (/s)         "
      "                                             \n"
      "        -         bad  infer      8      1       -       -        -        -"
      "                                    -  failed\n"
      "     main   mlp-train  train     16      2    step  12.500   2560.0      yes"
      "  FAIL param_rel_distance 0.03 > 0.01      ok\n"
      "# Cells: 2, 1 failed, 1 ok\n"
      "#  aaaa failed: shape mismatch\n";
  EXPECT_EQ(table, expected);
}

// Cells of one experiment, mode and batch that differ in precision or a switch are told
// apart by a "variant" column (the label's precision and settings), shown only then.
TEST(FormatSummaryTable, AVariantColumnTellsPrecisionsAndSwitchesApart) {
  CellSpec fp32;
  fp32.experiment = "resnet50-check";
  fp32.mode = Mode::kInfer;
  fp32.batch_size = 64;
  fp32.world_size = 1;
  CellSpec bf16 = fp32;
  bf16.precision = Precision::kBf16;
  bf16.channels_last = true;
  bf16.label_settings = {"channels_last"};
  nlohmann::json overview = {{"cells", nlohmann::json::object()}};
  overview["cells"]["a"] = {{"spec", to_json(fp32)}, {"status", "ok"}};
  overview["cells"]["b"] = {{"spec", to_json(bf16)}, {"status", "ok"}};
  const auto rows = summary_rows(overview);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].variant, "bf16/channels_last=true");
  EXPECT_EQ(rows[1].variant, "fp32");
  const std::string table = format_summary_table(rows);
  EXPECT_NE(table.find("  world                  variant  metric"), std::string::npos) << table;
  EXPECT_NE(table.find("      1  bf16/channels_last=true       -"), std::string::npos) << table;
  EXPECT_EQ(format_summary_table(summary_rows(overview_fixture())).find("variant"),
            std::string::npos)
      << "fp32 only: no column";
}

// Note [CPU oversubscription]: one line naming the worst cell. With cpu_threads auto only the
// MPI communication thread oversubscribes (the node, not the settings): a note whose remedy is
// fewer workers a node; with cpu_threads set, a warning to lower it. Never "set cpu_threads"
// when the cell already runs auto (issue 50: the quickstart warned about its own settings).
TEST(FormatSummaryTable, SaysWhenCellsRanMoreBusyThreadsThanCores) {
  auto overview = overview_fixture();
  EXPECT_EQ(format_summary_table(summary_rows(overview)).find("busy CPU threads"),
            std::string::npos);
  overview["cells"]["bbbb"]["summary"]["cpu_threads_per_core"] = 1.5;
  const std::string automatic = format_summary_table(summary_rows(overview));
  EXPECT_NE(automatic.find("# note: 1 cell ran more busy CPU threads than cores (worst 1.50 per "
                           "core: "),
            std::string::npos)
      << automatic;
  EXPECT_NE(automatic.find("run fewer workers a node"), std::string::npos) << automatic;
  EXPECT_EQ(automatic.find("set cpu_threads"), std::string::npos) << automatic;
  EXPECT_EQ(automatic.find("warning"), std::string::npos) << automatic;
  overview["cells"]["bbbb"]["spec"]["cpu_threads"] = 4;
  const std::string set = format_summary_table(summary_rows(overview));
  EXPECT_NE(set.find("# warning: 1 cell ran more busy CPU threads than cores"), std::string::npos)
      << set;
  EXPECT_NE(set.find("set cpu_threads"), std::string::npos) << set;
}

TEST(InfoJson, StableKeys) {
  const auto json = info_json("r.h5", overview_fixture());
  EXPECT_EQ(json.at("file"), "r.h5");
  EXPECT_EQ(json.at("provenance").at("mpi_size"), 3);
  EXPECT_EQ(json.at("counts").at("ok"), 1);
  ASSERT_EQ(json.at("cells").size(), 2u);
  const auto& failed = json.at("cells")[0];
  EXPECT_EQ(failed.at("cell_id"), "aaaa");
  EXPECT_EQ(failed.at("failed_phase"), "forward");
  EXPECT_EQ(failed.at("spec").at("experiment"), "bad");
  EXPECT_TRUE(failed.at("summary").is_null());
  EXPECT_FALSE(failed.contains("effective")) << "a cell that recorded none has none";
  const auto& ok = json.at("cells")[1];
  EXPECT_EQ(ok.at("summary").at("median_s"), 0.0125);
  EXPECT_EQ(ok.at("effective"), nlohmann::json({{"tf32", "false"}, {"cpu_threads", "2"}}));
  EXPECT_EQ(ok.at("ineffective_reasons").size(), 1u);
  EXPECT_EQ(ok.at("accuracy").at("verdict"), "failed");  // Note [Accuracy validation]
  EXPECT_FALSE(failed.contains("accuracy"));
}

/// An overview of a matrix with 3 repetitions of 2 cells; repetition 2 of batch 8 runs
/// 30 % slower (the repetitions then disagree).
nlohmann::json repeated_overview() {
  const auto cells = load_matrix_text("m.yaml",
                                      "sweep:\n  batch_sizes: [4, 8]\ndefaults: {repetitions: 3}\n"
                                      "experiments:\n  - name: a\n    model: mlp\n")
                         .cells;
  nlohmann::json overview = {{"cells", nlohmann::json::object()}};
  for (const auto& cell : cells) {
    const double median =
        0.010 * static_cast<double>(cell.batch_size) / 4.0 *
        (cell.batch_size == 8 && cell.repetition == 2 ? 1.3 : 1.0 + 0.01 * cell.repetition);
    overview["cells"][cell.cell_id] = {
        {"spec", to_json(cell)},
        {"status", "ok"},
        {"summary",
         {{"metric", "step"}, {"median_s", median}, {"throughput_samples_per_s", 4.0 / median}}}};
  }
  return overview;
}

TEST(FormatSeriesTable, OneLinePerSeriesWithIntervalsAndTheDisagreement) {
  const auto overview = repeated_overview();
  const std::string table = format_series_table(overview);
  EXPECT_NE(table.find("# Repetitions:"), std::string::npos) << table;
  EXPECT_NE(table.find("95% CI"), std::string::npos);
  // Batch 4: medians 10.0, 10.1, 10.2 ms: median 10.100, spread 2.0 %.
  EXPECT_NE(table.find("10.100"), std::string::npos) << table;
  EXPECT_NE(table.find("2.0%"), std::string::npos) << table;
  // Batch 8: 20.0, 20.2, 26.0 ms: spread 6 / 20.2 = 29.7 %: DISAGREE, and the warning.
  EXPECT_NE(table.find("29.7%  DISAGREE"), std::string::npos) << table;
  EXPECT_NE(table.find("# warning: 1 series' repetitions span more than 10%"), std::string::npos);
  EXPECT_NE(table.find("3/3"), std::string::npos);
  // The per-cell table numbers each run.
  const std::string cells = format_summary_table(summary_rows(overview));
  EXPECT_NE(cells.find("rep"), std::string::npos);
  EXPECT_NE(cells.find("3/3"), std::string::npos) << cells;
  // Nothing repeated: no table, no rep column.
  EXPECT_EQ(format_series_table(overview_fixture()), "");
  EXPECT_EQ(format_summary_table(summary_rows(overview_fixture())).find(" rep "),
            std::string::npos);
}

TEST(InfoJson, SeriesWithTheirIntervals) {
  const auto json = info_json("r.h5", repeated_overview());
  ASSERT_EQ(json.at("series").size(), 2u);
  for (const auto& series : json.at("series")) {
    EXPECT_EQ(series.at("repetitions"), 3);
    EXPECT_EQ(series.at("completed"), 3);
    EXPECT_EQ(series.at("cells").size(), 3u);
    const double low = series.at("median_s_ci")[0];
    const double high = series.at("median_s_ci")[1];
    EXPECT_LE(low, series.at("median_s").get<double>());
    EXPECT_GE(high, series.at("median_s").get<double>());
  }
  EXPECT_TRUE(info_json("r.h5", overview_fixture()).at("series").empty());
}

TEST(FormatProgramTimes, OneLinePerProgramCellWithItsLongestSegments) {
  // Note [Run-level segments]: what `info` shows of a program cell's run; "" without one.
  EXPECT_EQ(format_program_times(overview_fixture()), "");
  auto overview = overview_fixture();
  overview["cells"]["bbbb"]["program_times"] = nlohmann::json::parse(R"({
      "wall_s": 14.66, "steps_s": 4.58, "program_startup_s": 7.86,
      "program_after_steps_s": 2.21,
      "segments": {"data_setup": 0.094, "model_setup": 0.0015, "fit": 4.59, "train": 4.58}})");
  const std::string table = format_program_times(overview);
  EXPECT_NE(table.find("# Program cells: where the wall time went"), std::string::npos) << table;
  const auto line = table.substr(table.find("     main"));
  EXPECT_NE(line.find("14.66"), std::string::npos) << table;
  EXPECT_NE(line.find("7.86"), std::string::npos) << table;
  EXPECT_NE(line.find("2.21"), std::string::npos) << table;
  EXPECT_NE(line.find("fit 4.59, train 4.58, data_setup 0.09"), std::string::npos) << table;
  EXPECT_EQ(line.find("model_setup"), std::string::npos) << table;  // the three longest
  EXPECT_EQ(table.find("bad"), std::string::npos) << table;         // ok cells only
  EXPECT_DOUBLE_EQ(
      info_json("r.h5", overview).at("cells").at(1).at("program_times").at("wall_s").get<double>(),
      14.66);
}

}  // namespace
}  // namespace scalebench
