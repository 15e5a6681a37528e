// Logging with Boost.Log: severity, rank and cell attributes.
//
// Rank 0 logs to the console (stderr) at the chosen verbosity; every rank that is given
// a log directory also writes everything (debug and up) to <dir>/rank-<N>.log.
// Thread-safe: the global logger is a severity_logger_mt.
#pragma once

#include <boost/log/sources/global_logger_storage.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/sources/severity_logger.hpp>
#include <boost/log/trivial.hpp>
#include <filesystem>
#include <string>

namespace scalebench {

using Severity = boost::log::trivial::severity_level;

enum class Verbosity { kQuiet, kNormal, kVerbose };

struct LogOptions {
  Verbosity verbosity =
      Verbosity::kNormal;         ///< console: quiet=warning+, normal=info+, verbose=debug+
  int rank = 0;                   ///< MPI_COMM_WORLD rank, shown in every record
  bool console = true;            ///< write to stderr (rank 0 only, by convention)
  std::filesystem::path log_dir;  ///< empty = no per-rank file
};

/// Configures the sinks once per process. Calling it again replaces the sinks. The log
/// file is opened first, never through a symbolic link (O_NOFOLLOW): InputError when the
/// log directory cannot be created or `rank-<N>.log` cannot be opened or is a link; the
/// sinks are then unchanged.
void init_logging(const LogOptions& options);

/// Whether init_logging installed the console sink in this process (fatal records then
/// reach stderr already; callers print a message themselves only when this is false).
bool logging_to_console();

/// InputError unless `log_dir` can hold the log files of ranks 0..ranks-1: it is a
/// directory or can be created (the nearest existing ancestor is a directory), and no
/// `rank-<N>.log` in it is a symbolic link or anything but a regular file. Writes nothing.
void check_log_dir(const std::filesystem::path& log_dir, int ranks);

/// Sets the "Cell" attribute of records logged from this thread while alive.
class CellLogScope {
 public:
  explicit CellLogScope(const std::string& cell_id);
  ~CellLogScope();
  CellLogScope(const CellLogScope&) = delete;
  CellLogScope& operator=(const CellLogScope&) = delete;

 private:
  std::string previous_;
};

BOOST_LOG_INLINE_GLOBAL_LOGGER_DEFAULT(scalebench_logger,
                                       boost::log::sources::severity_logger_mt<Severity>)

}  // namespace scalebench

/// SB_LOG(info) << "text";  severities: trace debug info warning error fatal
#define SB_LOG(severity) \
  BOOST_LOG_SEV(::scalebench::scalebench_logger::get(), ::boost::log::trivial::severity)
