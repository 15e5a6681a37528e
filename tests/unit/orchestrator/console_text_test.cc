// The console's sentences wrap at word boundaries within the width (issue 29: the
// quickstart's console fits 100 columns).
#include "orchestrator/console_text.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace scalebench {
namespace {

TEST(WrapWords, BreaksAtSpacesWithinTheWidthAndKeepsEveryWord) {
  const std::string text =
      "3 cells ran more busy CPU threads than cores (worst 2.00 per core: 214f931de3260de1 mlp "
      "train): their backward / comm_wait split reflects core contention; set cpu_threads so "
      "that workers x (cpu_threads + 1) <= cores (docs/metrics.md#cpu-threads-and-the-backward--"
      "comm_wait-split)";
  const std::string wrapped = wrap_words(text, "# warning: ", "#   ", 100);
  std::istringstream lines(wrapped);
  std::string line;
  std::string rejoined;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100U) << line;
    EXPECT_EQ(line.rfind(count == 0 ? "# warning: " : "#   ", 0), 0U) << line;
    rejoined += (count == 0 ? line.substr(11) : " " + line.substr(4));
    ++count;
  }
  EXPECT_GT(count, 1);
  EXPECT_EQ(rejoined, text);
  EXPECT_EQ(wrapped.back(), '\n');
}

TEST(WrapWords, AShortTextIsOneLineAndALongWordStaysWhole) {
  EXPECT_EQ(wrap_words("a: OK, 3 cells", "", "  "), "a: OK, 3 cells\n");
  const std::string word(120, 'x');
  EXPECT_EQ(wrap_words("short " + word + " end", "", "  ", 100), "short\n  " + word + "\n  end\n");
}

}  // namespace
}  // namespace scalebench
