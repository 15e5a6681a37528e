#include "protocol/program/program_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace scalebench {
namespace {

TEST(ProgramReport, StepsBecomeRowsOfTheirPhasesOnTheGroupClock) {
  ProgramReport report;
  std::string buffer =
      R"({"v":1,"type":"hello","framework":"pytorch","rank":0,"world_size":1,"versions":{"client":"0.1.0"}})"
      "\n"
      R"({"v":1,"type":"step","warmup":true,"begin_ns":10000000000,"end_ns":11000000000,"phases":{"forward":[10000000000,10500000000]}})"
      "\n"
      R"({"v":1,"type":"step","warmup":false,"begin_ns":11000000000,"end_ns":13000000000,"phases":{"data":[11000000000,11500000000],"forward":[11500000000,13000000000]}})"
      "\n"
      R"({"v":1,"type":"metric","name":"loss","value":0.5})"
      "\n{\"v\":1,\"type\":\"summ";
  apply_records(report, buffer);
  EXPECT_EQ(buffer, "{\"v\":1,\"type\":\"summ");  // the incomplete line waits
  EXPECT_TRUE(report.hello);
  EXPECT_EQ(report.versions.at("client"), "0.1.0");
  EXPECT_EQ(report.metrics.at("loss"), 0.5);
  const auto t = program_timings(report, "step", 9.0, 4.0);
  EXPECT_EQ(t.phases, (std::vector<std::string>{"forward", "data", "step"}));
  EXPECT_EQ(t.warmup_iterations, 1);
  ASSERT_EQ(t.timings_s.size(), 6U);
  EXPECT_DOUBLE_EQ(t.timings_s[0], 0.5);
  EXPECT_TRUE(std::isnan(t.timings_s[1]));  // no data phase in the warm-up step: absent
  EXPECT_DOUBLE_EQ(t.timings_s[2], 1.0);
  EXPECT_DOUBLE_EQ(t.timings_s[3], 1.5);
  EXPECT_DOUBLE_EQ(t.timings_s[4], 0.5);
  EXPECT_DOUBLE_EQ(t.phase_starts_s[4], 2.0);  // data began at 11.0, origin 9.0
  EXPECT_DOUBLE_EQ(t.timings_s[5], 2.0);
}

TEST(ProgramReport, NoStepsIsOneMeasurementOfTheWallTime) {
  const auto t = program_timings(ProgramReport{}, "batch", 0.0, 3.5);
  EXPECT_EQ(t.phases, std::vector<std::string>{"batch"});
  EXPECT_EQ(t.timings_s, std::vector<double>{3.5});
}

TEST(ProgramReport, MalformedRecordsAreRefusedWithTheLine) {
  for (const std::string line :
       {std::string("not json"), std::string(R"({"type":"step"})"),
        std::string(R"({"v":2,"type":"hello"})"), std::string(R"({"v":1,"type":"nope"})"),
        std::string(R"({"v":1,"type":"step","begin_ns":2,"end_ns":1})"),
        std::string(R"({"v":1,"type":"step","begin_ns":1,"end_ns":2,"phases":{"f":[3]}})"),
        // A phase named like the iteration's own column would be lost in it.
        std::string(R"({"v":1,"type":"step","begin_ns":1,"end_ns":2,"phases":{"step":[1,2]}})")}) {
    ProgramReport report;
    try {
      apply_record(report, line);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const ProgramRecordError& e) {
      EXPECT_NE(std::string(e.what()).find(line.substr(0, 8)), std::string::npos) << e.what();
    }
  }
  ProgramReport report;
  std::string huge(kMaxRecordBytes + 10, 'x');
  EXPECT_THROW(apply_records(report, huge), ProgramRecordError);
}

TEST(ProgramReport, OutputsRecordsAddUpSamplesOfOneShape) {
  // Note [Accuracy across cells]
  ProgramReport report;
  apply_record(report, R"({"v":1,"type":"outputs","samples":4,"shape":[3,8]})");
  apply_record(report, R"({"v":1,"type":"outputs","samples":2,"shape":[3,8]})");
  EXPECT_EQ(report.output_samples, 6);
  EXPECT_EQ(report.output_sample_shape, (std::vector<int64_t>{3, 8}));
  EXPECT_THROW(apply_record(report, R"({"v":1,"type":"outputs","samples":1,"shape":[8,3]})"),
               ProgramRecordError);
  EXPECT_THROW(apply_record(report, R"({"v":1,"type":"outputs","samples":1,"shape":[0]})"),
               ProgramRecordError);
  EXPECT_THROW(apply_record(report, R"({"v":1,"type":"outputs","shape":[3]})"), ProgramRecordError);
}

}  // namespace
}  // namespace scalebench
