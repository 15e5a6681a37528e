// Lines of the console that are sentences rather than tables (validate's verdict, the run's
// warnings): wrapped at word boundaries so that the quickstart's console fits 100 columns
// (issue 29). Tables keep their rows whole: a row is read across, not down.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace scalebench {

/// Width the sentences of rank 0's console are wrapped at.
inline constexpr size_t kConsoleWidth = 100;

/// `text` broken at spaces into lines of at most `width` characters (a word longer than a
/// line stays whole), the first starting with `first`, the others with `rest`; each line
/// ends with '\n'.
std::string wrap_words(std::string_view text, std::string_view first, std::string_view rest,
                       size_t width = kConsoleWidth);

}  // namespace scalebench
