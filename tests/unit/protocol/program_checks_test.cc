// Note [Program steps asked and run] and Note [Program code identity]: the checks a worker
// makes of a program cell that ended well.
#include "program/program_checks.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace scalebench {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ProgramSteps, AsAskedOrNoneOrSlightlyMoreIsFine) {
  struct Case {
    int64_t warmup, measured, run;
    bool flagged;
  };
  const std::vector<Case> cases{
      {5, 15, 20, false}, {5, 15, 0, false},  // no client: said elsewhere
      {5, 15, 22, false},                     // within asked / 10
      {5, 15, 23, true},  {5, 15, 19, true}, {5, 15, 8, true}, {2, 3, 6, false}, {2, 3, 7, true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.flagged, steps_reason(c.warmup, c.measured, c.run, "", "").has_value())
        << c.warmup << "+" << c.measured << " asked, " << c.run << " run";
  }
}

TEST(ProgramSteps, FewerStepsNameBothCountsAndTheCause) {
  const auto reason = steps_reason(5, 15, 8, "max_epochs", "max_epochs=1 reached; global_step 8");
  ASSERT_TRUE(reason);
  EXPECT_TRUE(has(*reason,
                  "ran 8 steps, 20 were asked (5 warm-up + 15 measured), so 3 were "
                  "measured"))
      << *reason;
  EXPECT_TRUE(has(*reason, "ended by max_epochs")) << *reason;
  EXPECT_TRUE(has(*reason, "trainer.max_epochs=-1")) << *reason;
  EXPECT_TRUE(has(*reason, "max_epochs=1 reached; global_step 8")) << *reason;
  // The summary's remedies match on "only "; this reason must not look like too few samples.
  EXPECT_FALSE(has(*reason, "only ")) << *reason;

  const auto early = steps_reason(5, 15, 12, "early_stopping", "");
  ASSERT_TRUE(early);
  EXPECT_TRUE(has(*early, "~callbacks.early_stopping")) << *early;

  // Note [Lightning evaluation loops]: an inference cell whose evaluation ran out of batches.
  const auto evaluation =
      steps_reason(1, 9, 5, "dataloader_end", "the test loop ran out of batches after 5");
  ASSERT_TRUE(evaluation);
  EXPECT_TRUE(has(*evaluation, "ended by dataloader_end, its dataloader ran out")) << *evaluation;
  EXPECT_TRUE(has(*evaluation, "limit_*_batches")) << *evaluation;

  const auto unknown = steps_reason(5, 15, 12, "", "");
  ASSERT_TRUE(unknown);
  for (const char* cause : {"max_epochs", "limit_train_batches", "EarlyStopping", "dataset"}) {
    EXPECT_TRUE(has(*unknown, cause)) << cause << " in " << *unknown;
  }
}

TEST(ProgramSteps, ManyMoreStepsSayTheProgramIgnoresTheLimit) {
  const auto reason = steps_reason(2, 8, 100, "", "");
  ASSERT_TRUE(reason);
  EXPECT_TRUE(has(*reason, "ran 100 steps, 10 were asked")) << *reason;
  EXPECT_TRUE(has(*reason, "trainer.max_steps={steps}")) << *reason;
}

nlohmann::json code_json(bool shadowed) {
  return {{"type", "code"},
          {"tree", "/work/tree"},
          {"digest", "sha256:abc"},
          {"files", 3},
          {"modules", {"pkg/__init__.py"}},
          {"packages",
           {{{"name", "pkg"},
             {"file", shadowed ? "/venv/lib/python3.11/site-packages/pkg/__init__.py"
                               : "/work/tree/pkg/__init__.py"},
             {"in_tree", !shadowed},
             {"origin", shadowed ? "installed in the environment" : ""}},
            {{"name", "tools"}, {"file", ""}, {"in_tree", true}}}}};
}

TEST(ProgramCodeIdentity, AShadowedPackageIsNamedWithItsOriginAndTheRemedy) {
  const ProgramCode code = code_of_record(code_json(true));
  const auto reasons = code_reasons(code);
  ASSERT_EQ(reasons.size(), 1U);
  EXPECT_TRUE(has(reasons[0],
                  "'pkg' was imported from "
                  "/venv/lib/python3.11/site-packages/pkg/__init__.py (installed in "
                  "the environment), not from the branch's tree /work/tree"))
      << reasons[0];
  EXPECT_TRUE(has(reasons[0], "PYTHONPATH: \".\"")) << reasons[0];
  EXPECT_TRUE(has(reasons[0], "prepare")) << reasons[0];
  EXPECT_TRUE(code_reasons(code_of_record(code_json(false))).empty());
}

TEST(ProgramCodeIdentity, RecordedAsDigestPackagesAndUntrustedReasons) {
  ProgramReport report;
  report.code = code_of_record(code_json(true));
  CellSpec cell;
  cell.warmup_iterations = 2;
  cell.measured_iterations = 8;
  RankResult result;
  record_program_checks(result, report, cell);
  EXPECT_EQ(result.effective.at("program_code_digest"), "sha256:abc");
  EXPECT_EQ(result.effective.at("program_code_packages"),
            "pkg=/venv/lib/python3.11/site-packages/pkg/__init__.py");
  EXPECT_EQ(result.metrics.at("program_code_files"), 3.0);
  EXPECT_EQ(result.metrics.at("program_steps_asked"), 10.0);
  ASSERT_EQ(result.untrusted_reasons.size(), 1U);  // no steps: the wall-time case, not this
  EXPECT_TRUE(has(result.untrusted_reasons[0], "code identity:"));
}

TEST(ProgramCodeIdentity, WithoutTheClientItSaysNotChecked) {
  RankResult result;
  record_program_checks(result, ProgramReport{}, CellSpec{});
  EXPECT_EQ(result.effective.at("program_code_digest"), "not checked");
  ASSERT_EQ(result.ineffective_reasons.size(), 1U);
  EXPECT_TRUE(has(result.ineffective_reasons[0], "code identity not checked"));
  EXPECT_TRUE(result.untrusted_reasons.empty());
}

TEST(ProgramCodeIdentity, AFailedCellIsNotChecked) {
  RankResult result;
  result.status = CellStatus::kFailed;
  record_program_checks(result, ProgramReport{}, CellSpec{});
  EXPECT_TRUE(result.effective.empty());
  EXPECT_TRUE(result.ineffective_reasons.empty());
}

TEST(ProgramCodeIdentity, AMalformedRecordIsRefusedNamingTheField) {
  auto json = code_json(false);
  json.erase("files");
  EXPECT_THROW(code_of_record(json), std::invalid_argument);
  json = code_json(false);
  json["packages"][0].erase("in_tree");
  try {
    code_of_record(json);
    FAIL() << "accepted a package without in_tree";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(has(e.what(), "in_tree")) << e.what();
  }
  // The client could not tell: the record says why, and nothing else is required.
  EXPECT_EQ(code_of_record({{"type", "code"}, {"tree", "/t"}, {"error", "OSError: x"}}).error,
            "OSError: x");
}

TEST(ProgramReportRecords, EndedAndCodeRecordsAreRead) {
  ProgramReport report;
  apply_record(report, R"({"v":1,"type":"ended","by":"max_epochs","message":"max_epochs=1"})",
               RecordBounds{});
  EXPECT_EQ(report.ended_by, "max_epochs");
  EXPECT_EQ(report.ended_message, "max_epochs=1");
  apply_record(report, R"({"v":1,"type":"ended","message":"line1\nline2"})", RecordBounds{});
  EXPECT_EQ(report.ended_by, "other");  // the last one counts; `by` defaults to other
  EXPECT_EQ(report.ended_message.find('\n'), std::string::npos) << "kept on one line";
  auto record = code_json(true);
  record["v"] = 1;
  apply_record(report, record.dump(), RecordBounds{});
  ASSERT_TRUE(report.code);
  EXPECT_EQ(report.code->digest, "sha256:abc");
  ASSERT_EQ(report.code->packages.size(), 2U);
  EXPECT_FALSE(report.code->packages[0].in_tree);
  record.erase("digest");
  try {
    apply_record(report, record.dump(), RecordBounds{});
    FAIL() << "accepted a code record without its digest";
  } catch (const ProgramRecordError& e) {
    EXPECT_TRUE(has(e.what(), "digest")) << e.what();
  }
}

}  // namespace
}  // namespace scalebench
