// common/base/process_memory.h: /proc parsing and the resident set of a real process group.
#include "common/base/process_memory.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace scalebench {
namespace {

TEST(ProcessMemory, MemAvailableParses) {
  EXPECT_EQ(parse_mem_available_bytes("MemTotal: 100 kB\nMemAvailable:   2048 kB\n"), 2048 * 1024);
  EXPECT_FALSE(parse_mem_available_bytes("MemTotal: 100 kB\n").has_value());
  EXPECT_FALSE(parse_mem_available_bytes("MemAvailable: x kB\n").has_value());
  EXPECT_GT(mem_available_bytes().value_or(0), 0);
}

TEST(ProcessMemory, ProcStatParsesACommandNameWithSpacesAndParentheses) {
  const auto stat = parse_proc_stat(
      "4242 (a (b) c) S 1 4240 4240 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 12345 "
      "1048576000 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->process_group, 4240);
  EXPECT_EQ(stat->rss_pages, 2560);
  EXPECT_EQ(stat->state, 'S');
  EXPECT_TRUE(stat->live());
  const auto zombie = parse_proc_stat(
      "4243 (x) Z 1 4240 4240 0 -1 4194304 100 0 0 0 5 3 0 0 20 0 1 0 12345 "
      "0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0");
  ASSERT_TRUE(zombie.has_value());
  EXPECT_FALSE(zombie->live());
  EXPECT_EQ(read_proc_stat(::getpid()).value_or(ProcStat{}).state, 'R');  // this test, running
  EXPECT_FALSE(parse_proc_stat("no parenthesis").has_value());
  EXPECT_FALSE(parse_proc_stat("1 (x) S 1").has_value());
}

TEST(ProcessMemory, TheResidentSetOfAProcessGroupCountsItsMembers) {
  constexpr size_t kTouched = 64U << 20;
  // The child starts as a copy of this process, whose resident pages (more under ASan) it
  // shares and which count in its resident set too.
  const auto own = parse_proc_stat([] {
    std::ifstream in("/proc/self/stat");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }());
  ASSERT_TRUE(own.has_value());
  const int64_t inherited = own->rss_pages * ::sysconf(_SC_PAGESIZE);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // its own group, 64 MiB touched, then waits to be killed
    ::setpgid(0, 0);
    std::vector<char> block(kTouched);
    std::memset(block.data(), 1, block.size());
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  const int64_t rss = process_group_rss_bytes(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_GE(rss, static_cast<int64_t>(kTouched));
  EXPECT_LT(rss, static_cast<int64_t>(kTouched) + inherited + (32 << 20));  // one process
  EXPECT_EQ(process_group_rss_bytes(child), 0);                             // gone
}

}  // namespace
}  // namespace scalebench
