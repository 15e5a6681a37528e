// Note [Program profiles]: a program's `profile` record checked and kept, its profiled steps
// kept out of the measured ones, and what a rank records of them.
#include "program/program_profile.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "program/program_checks.h"

namespace scalebench {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string joined(const std::vector<std::string>& reasons) {
  std::string all;
  for (const auto& reason : reasons) all += reason + "\n";
  return all;
}

/// A step record of `begin` .. `end` ns, profiled or not.
std::string step(int64_t begin, int64_t end, bool profiled = false, bool warmup = false) {
  return R"({"v":1,"type":"step","warmup":)" + std::string(warmup ? "true" : "false") +
         (profiled ? R"(,"profile":true)" : "") + R"(,"begin_ns":)" + std::to_string(begin) +
         R"(,"end_ns":)" + std::to_string(end) + R"(,"phases":{"forward":[)" +
         std::to_string(begin) + "," + std::to_string(end) + "]}}";
}

const std::string kGoodProfile = R"({"v":1,"type":"profile","steps":2,"activities":["cpu"],"ops":[)"
                                 R"(["aten::relu","forward","cpu",2,0.001,0.002,-64.0],)"
                                 R"(["aten::addmm","forward","cpu",4,0.004,0.005,8704],)"
                                 R"(["aten::mm","backward","cpu",6,0.003,0.003,0]]})";

CellSpec profiled_cell(int64_t profile_steps = 2) {
  CellSpec cell;
  cell.warmup_iterations = 1;
  cell.measured_iterations = 2;
  cell.profile_steps = profile_steps;
  cell.program.command = {"python3", "train.py", "--steps", "{steps}"};
  return cell;
}

/// A report of 1 warm-up + 2 measured + `profiled` profiled steps (1 ms each), then `records`.
ProgramReport report_of(int profiled, const std::vector<std::string>& records) {
  ProgramReport report;
  int64_t t = 1'000'000'000;
  for (int i = 0; i < 3 + profiled; ++i, t += 2'000'000) {
    apply_record(report, step(t, t + (i < 3 ? 1'000'000 : 3'000'000), i >= 3, i == 0),
                 RecordBounds{});
  }
  for (const auto& record : records) apply_record(report, record, RecordBounds{});
  return report;
}

TEST(ProgramProfile, AGoodRecordBecomesTheRanksTableSortedBySelfTime) {
  const ProgramReport report = report_of(2, {kGoodProfile});
  EXPECT_EQ(report.steps.size(), 3U);  // the profiled steps are no measured ones
  EXPECT_EQ(report.profiled_step_s.size(), 2U);
  RankResult result;
  record_program_profile(result, report, profiled_cell());
  ASSERT_TRUE(result.profile) << joined(result.ineffective_reasons);
  EXPECT_TRUE(result.ineffective_reasons.empty()) << joined(result.ineffective_reasons);
  EXPECT_EQ(result.profile->steps, 2);
  EXPECT_EQ(result.profile->activities, std::vector<std::string>{"cpu"});
  ASSERT_EQ(result.profile->ops.size(), 3U);
  EXPECT_EQ(result.profile->ops[0],
            (OpRow{"aten::addmm", "forward", "cpu", 4, 0.004, 0.005, 8704.0}));
  EXPECT_EQ(result.profile->ops[1].name, "aten::mm");
  EXPECT_EQ(result.profile->ops[2].self_cpu_memory_bytes, -64.0);  // frees may outweigh
  EXPECT_EQ(result.metrics.at("profile_steps"), 2.0);
  EXPECT_NEAR(result.metrics.at("profile_step_s"), 0.003, 1e-12);  // ns to s
}

TEST(ProgramProfile, ABadRecordLeavesNoTableWithItsReasonQuotedAndNeverFails) {
  struct Case {
    std::string record;
    std::string reason;
  };
  const std::string head = R"({"v":1,"type":"profile","steps":2,"activities":["cpu"],"ops":[)";
  const std::vector<Case> cases{
      {head + R"(["a","forward","cpu",-1,0.1,0.1,0]]})", "count is not a non-negative integer"},
      {head + R"(["a","forward","cpu",1.5,0.1,0.1,0]]})", "count is not a non-negative integer"},
      {head + R"(["a","forward","cpu",1,-0.1,0.1,0]]})", "self_s is negative"},
      // A number beyond a double: nlohmann refuses the line (out_of_range.406).
      {head + R"(["a","forward","cpu",1,1e999,0.1,0]]})", "not a JSON object"},
      {head + R"(["a","forward","cpu",1,0.1,"x",0]]})", "total_s is not a number"},
      {head + R"(["a","forward","tpu",1,0.1,0.1,0]]})", "device is not cpu or cuda"},
      {head + R"(["a","forward","cpu",1,0.1,0.1]]})",
       "a row is not [name, phase, device, count, self_s, total_s, self_cpu_memory_bytes]"},
      {head + R"(["a\u001b[31m","forward","cpu",1,0.1,0.1,0]]})", "name with a control character"},
      {head + "[\"" + std::string(kMaxProfileNameBytes + 1, 'n') + R"(","f","cpu",1,0,0,0]]})",
       "name above 1024 bytes"},
      {head + R"([7,"forward","cpu",1,0.1,0.1,0]]})", "name is not text"},
      {R"({"v":1,"type":"profile","activities":["cpu"],"ops":[]})",
       "no non-negative integer 'steps'"},
      {R"({"v":1,"type":"profile","steps":2,"activities":["tpu"],"ops":[]})",
       "an activity that is not cpu or cuda"},
      {R"({"v":1,"type":"profile","steps":2,"activities":["cpu"]})", "no list 'ops'"},
      // Not JSON (invalid UTF-8), but named a profile: the profile is refused, not the cell.
      {"{\"v\":1, \"type\" : \"profile\",\"ops\":[[\"\xff\xfe\"]]}", "not a JSON object"},
  };
  for (const auto& c : cases) {
    ProgramReport report;
    ASSERT_NO_THROW(report = report_of(2, {c.record})) << c.record;
    RankResult result;
    record_program_profile(result, report, profiled_cell());
    EXPECT_FALSE(result.profile) << c.record;
    EXPECT_EQ(result.status, CellStatus::kOk);
    const std::string reasons = joined(result.ineffective_reasons);
    EXPECT_TRUE(has(reasons, "profile_steps: its profile record was refused: ")) << reasons;
    EXPECT_TRUE(has(reasons, c.reason + " in record '{")) << reasons;  // the record quoted
    EXPECT_EQ(result.metrics.count("profile_steps"), 0U);
  }
}

TEST(ProgramProfile, RowsAreBounded) {
  nlohmann::json record = {{"steps", 1}, {"activities", {"cpu"}}, {"ops", nlohmann::json::array()}};
  for (std::size_t i = 0; i <= kMaxProfileRows; ++i) {
    record["ops"].push_back({"a", "", "cpu", 1, 0.0, 0.0, 0.0});
  }
  EXPECT_THROW(profile_of_record(record), std::invalid_argument);
  record["ops"].erase(record["ops"].begin());
  EXPECT_EQ(profile_of_record(record).ops.size(), kMaxProfileRows);
}

TEST(ProgramProfile, TheClientsErrorAndDroppedRowsAreSaid) {
  RankResult failed;
  record_program_profile(
      failed,
      report_of(2, {R"({"v":1,"type":"profile","steps":0,"error":"the JAX adapter takes none"})"}),
      profiled_cell());
  EXPECT_FALSE(failed.profile);
  EXPECT_TRUE(has(joined(failed.ineffective_reasons),
                  "profile_steps: the client took no profile: the JAX adapter takes none"));

  RankResult dropped;
  std::string record = kGoodProfile;
  record.insert(record.size() - 1, R"(,"dropped_rows":40,"dropped_self_s":0.0125)");
  record_program_profile(dropped, report_of(2, {record}), profiled_cell());
  ASSERT_TRUE(dropped.profile);
  EXPECT_TRUE(has(joined(dropped.ineffective_reasons),
                  "the table holds the 3 rows of most self time; 40 more (12.5 ms"))
      << joined(dropped.ineffective_reasons);
}

TEST(ProgramProfile, AProgramThatRanFewerProfiledStepsKeepsThoseAndSaysSo) {
  std::string one = kGoodProfile;
  one.replace(one.find("\"steps\":2"), 9, "\"steps\":1");
  RankResult result;
  record_program_profile(result, report_of(1, {one}), profiled_cell(3));
  ASSERT_TRUE(result.profile);
  EXPECT_EQ(result.metrics.at("profile_steps"), 1.0);
  EXPECT_TRUE(has(joined(result.ineffective_reasons), "ran 1 of the 3 profiled steps asked"));
}

TEST(ProgramProfile, WithoutARecordTheReasonNamesTheLikelyCause) {
  RankResult counted;  // the program stopped at {warmup} + {iterations}
  record_program_profile(counted, report_of(0, {}), profiled_cell());
  EXPECT_TRUE(has(joined(counted.ineffective_reasons), "ran no step after its 3 warm-up"));
  EXPECT_TRUE(has(joined(counted.ineffective_reasons), "scalebench_client.profile_steps()"));
  EXPECT_TRUE(counted.untrusted_reasons.empty());

  RankResult old_client;
  record_program_profile(old_client, report_of(2, {}), profiled_cell());
  EXPECT_TRUE(has(joined(old_client.ineffective_reasons), "sent no profile record"));

  // No client: its one wall-time measurement holds the steps {steps} added.
  RankResult no_client;
  record_program_profile(no_client, ProgramReport{}, profiled_cell());
  EXPECT_TRUE(has(joined(no_client.ineffective_reasons), "no scalebench_client"));
  EXPECT_TRUE(has(joined(no_client.untrusted_reasons), "includes the 2 more steps"));
  CellSpec by_iterations = profiled_cell();
  by_iterations.program.command = {"python3", "train.py", "--steps", "{iterations}"};
  RankResult counted_no_client;
  record_program_profile(counted_no_client, ProgramReport{}, by_iterations);
  EXPECT_TRUE(counted_no_client.untrusted_reasons.empty());

  RankResult unprofiled;  // profile_steps 0: nothing recorded, whatever the program sent
  record_program_profile(unprofiled, report_of(2, {kGoodProfile}), profiled_cell(0));
  EXPECT_FALSE(unprofiled.profile);
  EXPECT_TRUE(unprofiled.ineffective_reasons.empty());
}

TEST(ProgramProfile, ProfiledStepsComeLastAndAreNotStepsRun) {
  EXPECT_THROW(report_of(1, {step(9'000'000'000, 9'000'000'001)}), ProgramRecordError);
  ProgramReport report;
  EXPECT_THROW(apply_record(report, step(1, 2, true, true), RecordBounds{}), ProgramRecordError);
  RecordBounds bounds;
  bounds.max_steps = 4;
  ProgramReport bounded;
  for (int i = 0; i < 3; ++i) apply_record(bounded, step(i, i + 1, i >= 2), bounds);
  apply_record(bounded, step(4, 5, true), bounds);
  EXPECT_THROW(apply_record(bounded, step(6, 7, true), bounds), ProgramRecordError);

  // Note [Program steps asked and run]: 1 + 2 asked and run, the 2 profiled ones uncounted.
  RankResult as_asked;
  record_program_checks(as_asked, report_of(2, {kGoodProfile}), profiled_cell());
  EXPECT_EQ(as_asked.metrics.at("program_steps_run"), 3.0);
  EXPECT_TRUE(as_asked.untrusted_reasons.empty()) << joined(as_asked.untrusted_reasons);
  // Steps beyond the profiled ones are steps run beyond those asked.
  RankResult beyond;
  record_program_checks(beyond, report_of(6, {kGoodProfile}), profiled_cell());
  EXPECT_EQ(beyond.metrics.at("program_steps_run"), 7.0);
  EXPECT_TRUE(has(joined(beyond.untrusted_reasons), "does not stop at {steps}"));
}

}  // namespace
}  // namespace scalebench
