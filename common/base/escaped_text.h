// Names from the user (paths, refs, experiment names) shown in messages: control
// characters escaped, so that a newline in a file name cannot forge a line of output or of
// a log, and an escape sequence cannot rewrite the terminal.
#pragma once

#include <concepts>
#include <filesystem>
#include <string>
#include <string_view>

namespace scalebench {

/// `text` with every control character (below 0x20, and 0x7f) written as a C escape:
/// `\n`, `\r`, `\t`, else `\xNN`. A backslash is kept as it is, and so is every other byte
/// (UTF-8 stays readable). Pure; for messages only, never for a path that is then opened.
[[nodiscard]] std::string escaped(std::string_view text);

/// A program's output as stored and shown: lines and tabs kept, every other control
/// character escaped as by escaped() (no escape sequence reaches a terminal, no NUL cuts a
/// stored string), and each byte that is not part of valid UTF-8 replaced by U+FFFD (the
/// results file holds UTF-8). Pure.
[[nodiscard]] std::string printable_output(std::string_view text);

/// One line of text from outside (a program's record, a name it reported) as stored and
/// shown: as printable_output(), but newlines and tabs are escaped too, so it stays one line.
/// Pure.
[[nodiscard]] std::string printable_line(std::string_view text);

/// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a valid
/// UTF-8 sequence (a quote cut there stays valid UTF-8). Pure.
[[nodiscard]] std::string_view utf8_prefix(std::string_view text, size_t max_bytes);

/// escaped(path.string()). A template only so that a std::string argument, which converts
/// to both a path and a string_view, picks the overload above.
template <class Path>
requires std::same_as<Path, std::filesystem::path>
[[nodiscard]] std::string escaped(const Path& path) {
  return escaped(std::string_view(path.native()));
}

}  // namespace scalebench
