#include "common/cell/probe_report.h"

#include <nlohmann/json.hpp>

#include "common/base/error.h"

namespace scalebench {

double busbw_factor(const std::string& operation, int world_size) {
  const double n = world_size;
  if (world_size <= 1) return 0.0;
  if (operation == "allreduce") return 2.0 * (n - 1) / n;
  if (operation == "allgather") return (n - 1) / n;
  return 1.0;  // broadcast
}

std::string to_json_text(const ProbeReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : report.rows) {
    rows.push_back({{"operation", row.operation},
                    {"in_place", row.in_place},
                    {"bytes", row.bytes},
                    {"elements", row.elements},
                    {"time_s", row.time_s},
                    {"algbw_gb_s", row.algbw_gb_s},
                    {"busbw_gb_s", row.busbw_gb_s},
                    {"max_error", row.max_error},
                    {"ok", row.ok},
                    {"baseline_time_s", row.baseline_time_s}});
  }
  return nlohmann::json{{"backend", report.backend},       {"device", report.device},
                        {"hosts", report.hosts},           {"devices", report.devices},
                        {"world_size", report.world_size}, {"iterations", report.iterations},
                        {"warmup", report.warmup},         {"rows", rows}}
      .dump();
}

ProbeReport probe_report_from_json_text(const std::string& text) {
  try {
    const auto json = nlohmann::json::parse(text);
    ProbeReport report;
    report.backend = json.at("backend").get<std::string>();
    report.device = json.at("device").get<std::string>();
    report.hosts = json.at("hosts").get<std::vector<std::string>>();
    report.devices = json.at("devices").get<std::vector<std::string>>();
    report.world_size = json.at("world_size").get<int>();
    report.iterations = json.at("iterations").get<int>();
    report.warmup = json.at("warmup").get<int>();
    for (const auto& item : json.at("rows")) {
      ProbeRow row;
      row.operation = item.at("operation").get<std::string>();
      row.in_place = item.at("in_place").get<bool>();
      row.bytes = item.at("bytes").get<int64_t>();
      row.elements = item.at("elements").get<int64_t>();
      row.time_s = item.at("time_s").get<double>();
      row.algbw_gb_s = item.at("algbw_gb_s").get<double>();
      row.busbw_gb_s = item.at("busbw_gb_s").get<double>();
      row.max_error = item.at("max_error").get<double>();
      row.ok = item.at("ok").get<bool>();
      row.baseline_time_s = item.at("baseline_time_s").get<double>();
      report.rows.push_back(std::move(row));
    }
    return report;
  } catch (const nlohmann::json::exception& error) {
    throw FatalError(std::string("malformed probe report from the workers: ") + error.what());
  }
}

}  // namespace scalebench
