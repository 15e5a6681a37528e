// libFuzzer target: the validators of names that reach git and the filesystem (refs,
// branch-tree experiment names, paths in a branch tree) and the text escaping of messages.
// They are pure: they must never crash, and an accepted ref or name must keep the
// properties the callers rely on (no leading '-', no "..", no NUL, bounded length).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/cell/messages.h"
#include "matrix/git_repo.h"
#include "matrix/tree_experiments.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (scalebench::ref_syntax_problem(text).empty()) {
    if (text.empty() || text[0] == '-' || text.find("..") != std::string::npos ||
        text.find('\0') != std::string::npos) {
      std::abort();  // an accepted ref that git would take as an option or a range
    }
  }
  if (scalebench::tree_experiment_name_problem(text).empty()) {
    if (text.empty() || text[0] == '/' || text.find("..") != std::string::npos ||
        text.find('\0') != std::string::npos || text.size() > 200) {
      std::abort();  // an accepted name that escapes configs/experiment/
    }
  }
  (void)scalebench::resolve_in_tree("/tree", text);
  return 0;
}
