// Memory of this node and of other processes, from /proc: the node's available memory (the
// default budget of batch_size auto on CPU) and the resident set of a process group (the
// budget a program cell's child is held to, Note [Program memory budget] in
// program/program_cell.cc).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace scalebench {

/// Bytes in a MiB: the unit of the memory settings (memory_limit_mb) and of messages.
inline constexpr double kMiB = 1024.0 * 1024.0;

/// MemAvailable of a /proc/meminfo text in bytes; nullopt when missing.
std::optional<int64_t> parse_mem_available_bytes(std::string_view meminfo_text);

/// This node's MemAvailable in bytes; nullopt when /proc/meminfo cannot be read.
std::optional<int64_t> mem_available_bytes();

/// One worker's share of MemAvailable when `workers` (at least 1) share the node: the default
/// memory budget of batch_size auto on CPU; 0 when MemAvailable cannot be read.
double available_memory_share_bytes(int workers);

/// The process group, resident set (pages) and state of a /proc/<pid>/stat text; nullopt
/// when it is not one (the command name, in parentheses, may hold spaces and parentheses).
struct ProcStat {
  pid_t process_group = 0;
  int64_t rss_pages = 0;
  char state = '?';  ///< 'R', 'S', ...; 'Z' a zombie, 'X' dead
  /// Not a zombie or dead: the process can still run (and write).
  [[nodiscard]] bool live() const { return state != 'Z' && state != 'X'; }
};
std::optional<ProcStat> parse_proc_stat(std::string_view stat_text);

/// parse_proc_stat of /proc/<pid>/stat; nullopt when it cannot be read (no such process).
std::optional<ProcStat> read_proc_stat(pid_t pid);

/// The sum of the resident sets of the live processes of process group `group`, bytes (0
/// when none). Reads /proc/<pid>/stat of every process, a few hundred microseconds on a node
/// with a few hundred processes.
int64_t process_group_rss_bytes(pid_t group);

}  // namespace scalebench
