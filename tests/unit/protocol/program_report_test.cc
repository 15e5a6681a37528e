#include "program/program_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "common/base/escaped_text.h"

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
  apply_records(report, buffer, RecordBounds{});
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
  for (const std::string& line :
       {std::string("not json"), std::string(R"({"type":"step"})"),
        std::string(R"({"v":2,"type":"hello"})"), std::string(R"({"v":1,"type":"nope"})"),
        std::string(R"({"v":1,"type":"step","begin_ns":2,"end_ns":1})"),
        std::string(R"({"v":1,"type":"step","begin_ns":1,"end_ns":2,"phases":{"f":[3]}})"),
        // A phase named like the iteration's own column would be lost in it.
        std::string(R"({"v":1,"type":"step","begin_ns":1,"end_ns":2,"phases":{"step":[1,2]}})")}) {
    ProgramReport report;
    try {
      apply_record(report, line, RecordBounds{});
      ADD_FAILURE() << "accepted: " << line;
    } catch (const ProgramRecordError& e) {
      EXPECT_NE(std::string(e.what()).find(line.substr(0, 8)), std::string::npos) << e.what();
    }
  }
  ProgramReport report;
  std::string huge(kMaxRecordBytes + 10, 'x');
  EXPECT_THROW(apply_records(report, huge, RecordBounds{}), ProgramRecordError);
}

TEST(ProgramReport, OutputsRecordsAddUpSamplesOfOneShape) {
  // Note [Accuracy across cells]
  ProgramReport report;
  apply_record(report, R"({"v":1,"type":"outputs","samples":4,"shape":[3,8]})", RecordBounds{});
  apply_record(report, R"({"v":1,"type":"outputs","samples":2,"shape":[3,8]})", RecordBounds{});
  EXPECT_EQ(report.output_samples, 6);
  EXPECT_EQ(report.output_sample_shape, (std::vector<int64_t>{3, 8}));
  EXPECT_THROW(
      apply_record(report, R"({"v":1,"type":"outputs","samples":1,"shape":[8,3]})", RecordBounds{}),
      ProgramRecordError);
  EXPECT_THROW(
      apply_record(report, R"({"v":1,"type":"outputs","samples":1,"shape":[0]})", RecordBounds{}),
      ProgramRecordError);
  EXPECT_THROW(apply_record(report, R"({"v":1,"type":"outputs","shape":[3]})", RecordBounds{}),
               ProgramRecordError);
}

/// Note [Program record bounds], for the tests below: a program launched at 100 s, read at
/// 200 s, of at most 4 steps, on a clock of 1 ns.
RecordBounds bounds() {
  RecordBounds b;
  b.launch_ns = 100'000'000'000;
  b.read_ns = 200'000'000'000;
  b.resolution_ns = 1;
  b.max_steps = 4;
  return b;
}

std::string step_line(const std::string& begin, const std::string& end,
                      const std::string& phases = "") {
  return R"({"v":1,"type":"step","warmup":false,"begin_ns":)" + begin + R"(,"end_ns":)" + end +
         R"(,"phases":{)" + phases + "}}";
}

/// The refusal's message of `line` under `bounds()`, "" when it was accepted.
std::string refusal(const std::string& line) {
  ProgramReport report;
  try {
    apply_record(report, line, bounds());
  } catch (const ProgramRecordError& e) {
    return e.what();
  }
  return "";
}

TEST(ProgramReport, ImpossibleTimesAreRefusedWithTheRecord) {
  // issue 41: a step of 9.2e9 s, a start-up of -9e9 s, phases of +-1000 s in a 1 us step.
  const struct {
    std::string line;
    std::string why;  ///< "" when the record is possible
  } cases[] = {
      {step_line("150000000000", "150000001000", R"("f":[150000000000,150000001000])"), ""},
      {step_line("100000000000", "200000000000"), ""},  // the whole window: inside
      {step_line("99999999999", "200000000001", R"("f":[99999999998,200000000002])"),
       ""},  // within the clock's resolution (1 ns)
      {step_line("100000000000", "9223372036854775807"), "a step outside the program's run"},
      {step_line("-9000000000000000000", "150000000000"), "a step outside the program's run"},
      {step_line("99999999998", "150000000000"), "a step outside the program's run"},
      {step_line("150000000000", "200000000002"), "a step outside the program's run"},
      {step_line("150000000000", "150000001000", R"("f":[149000000000,151000000000])"),
       "phase 'f' outside its step"},
      {step_line("150000000000", "150000001000", R"("f":[150000000000,150000001002])"),
       "phase 'f' outside its step"},
      {step_line("150000000000", "9223372036854775808"),
       "'end_ns' = 9223372036854775808 ns is above the largest CLOCK_MONOTONIC time"},
      {step_line("150000000000", "150000001000", R"("f":[150000000000,18446744073709551615])"),
       "a phase's end = 18446744073709551615 ns is above the largest"},
      {step_line("150000000001", "150000000000"), "a step ends before it begins"},
  };
  for (const auto& c : cases) {
    const std::string message = refusal(c.line);
    if (c.why.empty()) {
      EXPECT_EQ(message, "") << c.line;
      continue;
    }
    EXPECT_NE(message.find(c.why), std::string::npos) << c.line << "\n" << message;
    EXPECT_NE(message.find(c.line.substr(0, 40)), std::string::npos) << message;  // quoted
  }
}

TEST(ProgramReport, StepsBeyondTheLimitAreRefused) {
  // issue 41: a flood of step records is refused at max_steps + 1, not kept.
  EXPECT_EQ(step_limit(2, 10), 2 * 12 + kStepMargin);
  ProgramReport report;
  std::string buffer;
  for (int i = 0; i < 4; ++i) buffer += step_line("150000000000", "150000000001") + "\n";
  apply_records(report, buffer, bounds());
  EXPECT_EQ(report.steps.size(), 4U);
  buffer = step_line("150000000000", "150000000001") + "\n";
  try {
    apply_records(report, buffer, bounds());
    ADD_FAILURE() << "a fifth step was kept";
  } catch (const ProgramRecordError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 4 steps"), std::string::npos) << e.what();
  }
  EXPECT_EQ(report.steps.size(), 4U);
}

TEST(ProgramReport, NamesAndMetricsAreBounded) {
  RecordBounds unbounded;
  ProgramReport report;
  for (size_t i = 0; i < kMaxMetricNames; ++i) {
    apply_record(report,
                 R"({"v":1,"type":"metric","name":"m)" + std::to_string(i) + R"(","value":1})",
                 unbounded);
  }
  apply_record(report, R"({"v":1,"type":"metric","name":"m0","value":2})", unbounded);  // known
  EXPECT_THROW(apply_record(report, R"({"v":1,"type":"metric","name":"new","value":1})", unbounded),
               ProgramRecordError);
  EXPECT_THROW(apply_record(report,
                            R"({"v":1,"type":"metric","name":")" +
                                std::string(kMaxNameBytes + 1, 'n') + R"(","value":1})",
                            unbounded),
               ProgramRecordError);
  ProgramReport phases;
  std::string many;
  for (size_t i = 0; i <= kMaxPhaseNames; ++i) {
    if (i > 0) many += ",";
    many += "\"p" + std::to_string(i) + "\":[1,2]";
  }
  EXPECT_THROW(apply_record(phases, step_line("1", "2", many), unbounded), ProgramRecordError);
}

TEST(ProgramReport, FieldsOfTheWrongTypeAreRefusedNotThrownThrough) {
  // nlohmann's value() throws its own type_error, which no caller catches.
  for (const std::string& line :
       {std::string(R"({"v":1,"type":"hello","rank":"0"})"),
        std::string(R"({"v":1,"type":"hello","framework":7})"),
        std::string(R"({"v":1,"type":"step","warmup":"yes","begin_ns":1,"end_ns":2})"),
        std::string(R"({"v":1,"type":"error","message":["x"]})"),
        std::string(R"({"v":1,"type":"memory","kind":1,"peak_bytes":1})"),
        std::string(R"({"v":1,"type":7})"), std::string(R"({"v":1.5,"type":"hello"})"),
        std::string(R"({"v":99999999999999999999,"type":"hello"})")}) {
    ProgramReport report;
    EXPECT_THROW(apply_record(report, line, RecordBounds{}), ProgramRecordError) << line;
  }
}

TEST(ProgramReport, TextFromTheProgramIsValidUtf8AndPrintable) {
  // issue 41: a quote cut inside a character, raw escapes in a record, control characters in
  // names and messages.
  const std::string euro = "\xe2\x82\xac";
  std::string line = R"({"v":1,"type":"nope","x":")";
  while (line.size() < 199) line += "a";
  line += euro + "\x1b[2J\"}";  // the character straddles the 200-byte cut
  const std::string message = refusal(line);
  ASSERT_FALSE(message.empty());
  EXPECT_EQ(printable_line(message), message) << message;  // valid UTF-8, nothing to escape
  EXPECT_EQ(message.find('\x1b'), std::string::npos);
  const std::string invalid = refusal("{\"v\":1,\"type\":\"step\xff\x1b]0;t\x07\"}");
  EXPECT_EQ(printable_line(invalid), invalid) << invalid;
  EXPECT_NE(invalid.find("\\x1b]0;t\\x07"), std::string::npos) << invalid;
  EXPECT_NE(refusal(step_line("150000000000", "150000000001",
                              R"("a\u001b[2J":[150000000000,150000000001])"))
                .find("a phase name with a control character"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"v":1,"type":"metric","name":"l\nx","value":1})")
                .find("a metric name with a control character"),
            std::string::npos);
  ProgramReport report;
  apply_record(report,
               R"({"v":1,"type":"error","kind":"error","message":"Boom\u001b[2J\nline 2\tx"})",
               RecordBounds{});
  EXPECT_EQ(report.error_message, "Boom\\x1b[2J\nline 2\tx");
  apply_record(
      report, R"({"v":1,"type":"hello","framework":"py\u001b]0;t\u0007","versions":{"c\n":"1\r"}})",
      RecordBounds{});
  EXPECT_EQ(report.framework, "py\\x1b]0;t\\x07");
  EXPECT_EQ(report.versions.at("c\\n"), "1\\r");
}

TEST(ProgramReport, OutputsSizesCannotWrap) {
  // issue 41: 2^62 + 1 samples x 4 bytes wrapped to 4 and matched a 4-byte file.
  for (const std::string& line :
       {std::string(R"({"v":1,"type":"outputs","samples":4611686018427387905,"shape":[1]})"),
        std::string(R"({"v":1,"type":"outputs","samples":1,"shape":[4611686018427387904,4]})"),
        std::string(R"({"v":1,"type":"outputs","samples":1073741824,"shape":[1]})")}) {
    ProgramReport report;
    EXPECT_THROW(apply_record(report, line, RecordBounds{}), ProgramRecordError) << line;
    EXPECT_EQ(report.output_samples, 0);
  }
  ProgramReport report;  // the sum of records too
  apply_record(report, R"({"v":1,"type":"outputs","samples":268435455,"shape":[1]})",
               RecordBounds{});
  EXPECT_THROW(
      apply_record(report, R"({"v":1,"type":"outputs","samples":9223372036854775807,"shape":[1]})",
                   RecordBounds{}),
      ProgramRecordError);
  EXPECT_EQ(report.output_samples, 268435455);
}

std::string segment_line(const std::string& name, const std::string& begin,
                         const std::string& end) {
  return R"({"v":1,"type":"segment","name":")" + name + R"(","begin_ns":)" + begin +
         R"(,"end_ns":)" + end + "}";
}

TEST(ProgramReport, SegmentsSumTheirTimeAndCountPerName) {
  // Note [Run-level segments]: each validation loop adds to one total, never a list.
  ProgramReport report;
  apply_record(report, segment_line("validation", "110000000000", "111500000000"), bounds());
  apply_record(report, segment_line("validation", "120000000000", "120500000000"), bounds());
  apply_record(report, segment_line("fit", "105000000000", "130000000000"), bounds());
  ASSERT_EQ(report.segments.size(), 2U);
  EXPECT_DOUBLE_EQ(report.segments.at("validation").total_s, 2.0);
  EXPECT_EQ(report.segments.at("validation").count, 2);
  EXPECT_DOUBLE_EQ(report.segments.at("fit").total_s, 25.0);
  EXPECT_EQ(report.segments.at("fit").count, 1);
  EXPECT_DOUBLE_EQ(report.segments.at("validation").first_begin_s, 110.0);
  EXPECT_DOUBLE_EQ(report.segments.at("fit").first_begin_s, 105.0);
}

TEST(ProgramReport, ImpossibleOrUnboundedSegmentsAreRefused) {
  const struct {
    std::string line;
    std::string why;
  } cases[] = {
      {segment_line("s", "99000000000", "110000000000"), "a segment outside the program's run"},
      {segment_line("s", "150000000000", "200000000002"), "a segment outside the program's run"},
      {segment_line("s", "150000000001", "150000000000"), "a segment ends before it begins"},
      {segment_line("", "150000000000", "150000000001"), "an empty segment name"},
      {segment_line("a\\u001b[2J", "150000000000", "150000000001"), "a control character"},
      {R"({"v":1,"type":"segment","begin_ns":1,"end_ns":2})", "no string 'name'"},
      {R"({"v":1,"type":"segment","name":"s","begin_ns":150000000000})", "no integer 'end_ns'"},
  };
  for (const auto& c : cases) {
    const std::string message = refusal(c.line);
    EXPECT_NE(message.find(c.why), std::string::npos) << c.line << "\n" << message;
  }
  ProgramReport report;  // at most kMaxSegmentNames names; a known name always adds
  for (std::size_t i = 0; i < kMaxSegmentNames; ++i) {
    apply_record(report, segment_line("s" + std::to_string(i), "150000000000", "150000000001"),
                 bounds());
  }
  apply_record(report, segment_line("s0", "150000000000", "150000000001"), bounds());
  EXPECT_EQ(report.segments.at("s0").count, 2);
  EXPECT_THROW(apply_record(report, segment_line("new", "150000000000", "150000000001"), bounds()),
               ProgramRecordError);
  EXPECT_EQ(report.segments.size(), kMaxSegmentNames);
}

// A NaN or infinite metric (a diverged loss) is a figure, written as a text JSON can hold
// (scalebench_client.metric); any other text is refused.
TEST(ProgramReport, NonFiniteMetricsTravelAsTextAndAreKept) {
  ProgramReport report;
  apply_record(report, R"({"v":1,"type":"metric","name":"loss","value":"nan"})", RecordBounds{});
  apply_record(report, R"({"v":1,"type":"metric","name":"up","value":"inf"})", RecordBounds{});
  apply_record(report, R"({"v":1,"type":"metric","name":"down","value":"-inf"})", RecordBounds{});
  EXPECT_TRUE(std::isnan(report.metrics.at("loss")));
  EXPECT_EQ(report.metrics.at("up"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(report.metrics.at("down"), -std::numeric_limits<double>::infinity());
  EXPECT_NE(refusal(R"({"v":1,"type":"metric","name":"x","value":"NaN!"})")
                .find("neither a number nor one of"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"v":1,"type":"metric","name":"x","value":true})").find("no number 'value'"),
            std::string::npos);
}

}  // namespace
}  // namespace scalebench
