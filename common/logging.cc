#include "common/logging.h"

#include <boost/core/null_deleter.hpp>
#include <boost/log/attributes/constant.hpp>
#include <boost/log/attributes/mutable_constant.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/support/date_time.hpp>
#include <boost/log/utility/setup/common_attributes.hpp>
#include <fstream>
#include <iostream>
#include <memory>

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

}  // namespace

void init_logging(const LogOptions& options) {
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

  if (options.console) {
    auto sink = boost::make_shared<TextSink>();
    sink->locked_backend()->add_stream(
        boost::shared_ptr<std::ostream>(&std::clog, boost::null_deleter()));
    sink->locked_backend()->auto_flush(true);
    sink->set_filter(severity_kw >= console_threshold(options.verbosity));
    sink->set_formatter(format);
    core->add_sink(sink);
  }
  if (!options.log_dir.empty()) {
    std::filesystem::create_directories(options.log_dir);
    auto file = boost::make_shared<std::ofstream>(
        options.log_dir / ("rank-" + std::to_string(options.rank) + ".log"), std::ios::app);
    auto sink = boost::make_shared<TextSink>();
    sink->locked_backend()->add_stream(file);
    sink->locked_backend()->auto_flush(true);
    sink->set_filter(severity_kw >= logging::trivial::debug);
    sink->set_formatter(format);
    core->add_sink(sink);
  }
}

CellLogScope::CellLogScope(const std::string& cell_id) : previous_(cell_attribute().get()) {
  cell_attribute().set(cell_id);
}

CellLogScope::~CellLogScope() { cell_attribute().set(previous_); }

}  // namespace scalebench
