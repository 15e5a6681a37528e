#include "common/base/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace scalebench {
namespace {

/// The next space-separated field of `rest`, removed from it.
std::string_view next_field(std::string_view& rest) {
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  const size_t end = std::min(rest.find(' '), rest.size());
  const std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

template <typename Integer>
std::optional<Integer> parse_integer(std::string_view text) {
  Integer value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return {};
  return value;
}

}  // namespace

std::optional<int64_t> parse_mem_available_bytes(std::string_view meminfo_text) {
  constexpr std::string_view kKey = "MemAvailable:";
  const size_t at = meminfo_text.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = meminfo_text.substr(at + kKey.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  int64_t kib = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  if (error != std::errc() || kib < 0) return std::nullopt;
  if (!std::string_view(end, rest.data() + rest.size()).starts_with(" kB")) return std::nullopt;
  return kib * 1024;
}

std::optional<int64_t> mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_mem_available_bytes(text.str());
}

double available_memory_share_bytes(int workers) {
  const auto available = mem_available_bytes();
  return available ? static_cast<double>(*available) / std::max(1, workers) : 0;
}

std::optional<ProcStat> parse_proc_stat(std::string_view stat_text) {
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  //  utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize rss ..."
  const size_t close = stat_text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat_text.substr(close + 1);
  const std::string_view state = next_field(rest);
  next_field(rest);  // ppid
  const auto group = parse_integer<pid_t>(next_field(rest));
  for (int skipped = 0; skipped < 18; ++skipped) next_field(rest);  // session .. vsize
  const auto rss = parse_integer<int64_t>(next_field(rest));
  if (!group || !rss) return std::nullopt;
  return ProcStat{*group, *rss, state.empty() ? '?' : state.front()};
}

// Note [Reading a process that exits]: /proc/<pid>/stat of a process that exits between the
// open and the read fails the read with ESRCH, and libstdc++'s filebuf throws on a failed read
// whatever the stream's exception mask (an ASan ctest run saw "basic_filebuf::underflow error
// reading the file: No such process" from a directory scan). So the file is read with
// open/read: a process gone at any point is nullopt, never an exception.
std::optional<ProcStat> read_proc_stat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  std::array<char, 1024> buffer{};
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) > 0) {
    text.append(buffer.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  if (got < 0) return std::nullopt;
  return parse_proc_stat(text);
}

int64_t process_group_rss_bytes(pid_t group) {
  static const int64_t page_bytes = ::sysconf(_SC_PAGESIZE);
  int64_t pages = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator it("/proc", error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() < '0' || name.front() > '9') continue;
    const auto stat = read_proc_stat(static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10)));
    if (stat && stat->process_group == group) {
      pages += stat->rss_pages;
    }
  }
  return pages * page_bytes;
}

}  // namespace scalebench
