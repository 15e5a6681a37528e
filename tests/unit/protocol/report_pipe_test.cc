// Note [Program record bounds]: the report channel is never read past the record limit, however
// much a program has written (issue 41: drain used to read the pipe empty first).
#include "program/report_pipe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "program/program_report.h"

namespace scalebench::program {
namespace {

TEST(ProgramReportPipe, NeverReadsPastTheLimit) {
  ReportPipe pipe;
  const int write_fd = pipe.write_fd();
  constexpr int kPipeBytes = 1 << 20;
  if (::fcntl(write_fd, F_SETPIPE_SZ, kPipeBytes) < kPipeBytes) {
    GTEST_SKIP() << "the pipe cannot hold 1 MiB here (fs.pipe-max-size)";
  }
  const std::string line(200 * 1024, 'x');  // an endless line, as far as the reader knows
  ASSERT_EQ(::write(write_fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  const std::size_t limit = kMaxRecordBytes + 1;
  std::string buffer;
  EXPECT_EQ(pipe.drain(buffer, limit), limit);
  EXPECT_EQ(buffer.size(), limit);
  EXPECT_EQ(pipe.drain(buffer, limit), 0U);  // full: nothing more is read
  buffer = "abc";
  EXPECT_EQ(pipe.drain(buffer, limit), limit - 3);
  buffer.clear();
  EXPECT_EQ(pipe.drain(buffer, 1 << 30), line.size() - 2 * limit + 3);  // the rest, then empty
  EXPECT_EQ(pipe.drain(buffer, 1 << 30), 0U);
}

TEST(ProgramReportPipe, HoldsWhatOneCheckReads) {
  // Note [Report pipe capacity]: a program writing records faster than 64 KiB per 50 ms check
  // must not block in its timed steps; the pipe holds 1 MiB where the system allows it.
  ReportPipe pipe;
  int allowed = 0;
  if (FILE* limit = std::fopen("/proc/sys/fs/pipe-max-size", "r")) {
    if (std::fscanf(limit, "%d", &allowed) != 1) allowed = 0;
    std::fclose(limit);
  }
  if (allowed < ReportPipe::kPipeBytes) GTEST_SKIP() << "fs.pipe-max-size is " << allowed;
  EXPECT_GE(pipe.capacity(), ReportPipe::kPipeBytes);
  const std::string records(ReportPipe::kPipeBytes - 1, 'x');
  const int write_fd = pipe.write_fd();
  ::fcntl(write_fd, F_SETFL, ::fcntl(write_fd, F_GETFL) | O_NONBLOCK);
  EXPECT_EQ(::write(write_fd, records.data(), records.size()),
            static_cast<ssize_t>(records.size()));  // all of it, without blocking
}

}  // namespace
}  // namespace scalebench::program
