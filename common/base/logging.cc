#include "common/base/logging.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <boost/core/null_deleter.hpp>
#include <boost/log/attributes/constant.hpp>
#include <boost/log/attributes/mutable_constant.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/support/date_time.hpp>
#include <boost/log/utility/setup/common_attributes.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <streambuf>

#include "common/base/error.h"
#include "common/base/escaped_text.h"

namespace scalebench {
namespace {

namespace logging = boost::log;
namespace expr = boost::log::expressions;
namespace sinks = boost::log::sinks;
namespace attrs = boost::log::attributes;

using TextSink = sinks::synchronous_sink<sinks::text_ostream_backend>;

BOOST_LOG_ATTRIBUTE_KEYWORD(severity_kw, "Severity", Severity)
BOOST_LOG_ATTRIBUTE_KEYWORD(rank_kw, "Rank", int)
BOOST_LOG_ATTRIBUTE_KEYWORD(cell_kw, "Cell", std::string)
BOOST_LOG_ATTRIBUTE_KEYWORD(timestamp_kw, "TimeStamp", boost::posix_time::ptime)

// The per-thread cell attribute. thread_local: each worker thread tags its own records.
attrs::mutable_constant<std::string>& cell_attribute() {
  thread_local attrs::mutable_constant<std::string> attribute{std::string()};
  return attribute;
}

Severity console_threshold(Verbosity verbosity) {
  switch (verbosity) {
    case Verbosity::kQuiet:
      return logging::trivial::warning;
    case Verbosity::kVerbose:
      return logging::trivial::debug;
    case Verbosity::kNormal:
      break;
  }
  return logging::trivial::info;
}

/// An output stream buffer over a file descriptor it owns; every write goes straight to
/// write(2) (the sink flushes after each record anyway).
class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd) : fd_(fd) {}
  FdStreambuf(const FdStreambuf&) = delete;
  FdStreambuf& operator=(const FdStreambuf&) = delete;
  ~FdStreambuf() override { ::close(fd_); }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char byte = traits_type::to_char_type(c);
    return xsputn(&byte, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* data, std::streamsize size) override {
    std::streamsize done = 0;
    while (done < size) {
      const ssize_t put = ::write(fd_, data + done, static_cast<size_t>(size - done));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) break;
      done += put;
    }
    return done;
  }

 private:
  int fd_;
};

/// An ostream that owns its FdStreambuf.
class FdOstream : public std::ostream {
 public:
  explicit FdOstream(int fd) : std::ostream(nullptr), buffer_(fd) { rdbuf(&buffer_); }

 private:
  FdStreambuf buffer_;
};

/// Opens `<log_dir>/rank-<rank>.log` for appending, never through a symbolic link.
boost::shared_ptr<std::ostream> open_rank_log(const std::filesystem::path& log_dir, int rank) {
  std::error_code error;
  std::filesystem::create_directories(log_dir, error);
  if (error || !std::filesystem::is_directory(log_dir)) {
    throw InputError("--log-dir " + escaped(log_dir) + ": cannot create the log directory (" +
                     (error ? error.message() : std::string("it is not a directory")) +
                     "); pass a directory you can write with --log-dir");
  }
  const auto path = log_dir / ("rank-" + std::to_string(rank) + ".log");
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    const int open_error = errno;
    throw InputError("cannot open the log file " + escaped(path) + ": " +
                     (open_error == ELOOP ? std::string("it is a symbolic link, which scalebench "
                                                        "does not follow; remove it")
                                          : std::string(std::strerror(open_error))) +
                     ", or pass another --log-dir");
  }
  return boost::make_shared<FdOstream>(fd);
}

}  // namespace

namespace {
std::atomic<bool>& console_sink_active() {
  static std::atomic<bool> active{false};
  return active;
}
}  // namespace

bool logging_to_console() { return console_sink_active().load(); }

void init_logging(const LogOptions& options) {
  const auto file = options.log_dir.empty() ? boost::shared_ptr<std::ostream>()
                                            : open_rank_log(options.log_dir, options.rank);
  auto core = logging::core::get();
  core->remove_all_sinks();
  core->add_global_attribute("TimeStamp", attrs::local_clock());
  core->add_global_attribute("Rank", attrs::constant<int>(options.rank));
  core->add_thread_attribute("Cell", cell_attribute());

  const auto format = expr::stream
                      << expr::format_date_time(timestamp_kw, "%H:%M:%S.%f") << " [r" << rank_kw
                      << "] " << severity_kw
                      << expr::if_(expr::has_attr(cell_kw) &&
                                   cell_kw != std::string())[expr::stream << " {" << cell_kw << "}"]
                      << ": " << expr::smessage;

  console_sink_active().store(options.console);
  if (options.console) {
    auto sink = boost::make_shared<TextSink>();
    sink->locked_backend()->add_stream(
        boost::shared_ptr<std::ostream>(&std::clog, boost::null_deleter()));
    sink->locked_backend()->auto_flush(true);
    sink->set_filter(severity_kw >= console_threshold(options.verbosity));
    sink->set_formatter(format);
    core->add_sink(sink);
  }
  if (file) {
    auto sink = boost::make_shared<TextSink>();
    sink->locked_backend()->add_stream(file);
    sink->locked_backend()->auto_flush(true);
    sink->set_filter(severity_kw >= logging::trivial::debug);
    sink->set_formatter(format);
    core->add_sink(sink);
  }
}

void check_log_dir(const std::filesystem::path& log_dir, int ranks) {
  std::error_code error;
  const auto status = std::filesystem::status(log_dir, error);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status)) {
    throw InputError("--log-dir " + escaped(log_dir) +
                     " exists and is not a directory; pass a directory with --log-dir "
                     "(default: <output>.logs)");
  }
  if (!std::filesystem::exists(status)) {
    auto ancestor = std::filesystem::absolute(log_dir, error).parent_path();
    while (!ancestor.empty() && !std::filesystem::exists(ancestor, error) &&
           ancestor != ancestor.root_path()) {
      ancestor = ancestor.parent_path();
    }
    if (!std::filesystem::is_directory(ancestor, error)) {
      throw InputError("--log-dir " + escaped(log_dir) + " cannot be created: " +
                       escaped(ancestor) + " is not a directory; pass another --log-dir");
    }
    return;
  }
  for (int rank = 0; rank < ranks; ++rank) {
    const auto path = log_dir / ("rank-" + std::to_string(rank) + ".log");
    const auto link = std::filesystem::symlink_status(path, error);
    if (!std::filesystem::exists(link) || std::filesystem::is_regular_file(link)) continue;
    throw InputError(
        "log file " + escaped(path) + " is " +
        (std::filesystem::is_symlink(link) ? "a symbolic link" : "not a regular file") +
        ", which scalebench does not write through; remove it, or pass another "
        "--log-dir");
  }
}

CellLogScope::CellLogScope(const std::string& cell_id) : previous_(cell_attribute().get()) {
  cell_attribute().set(cell_id);
}

CellLogScope::~CellLogScope() { cell_attribute().set(previous_); }

}  // namespace scalebench
