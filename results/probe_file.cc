#include "results/probe_file.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/build_info.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/durable_file.h"
#include "results/provenance.h"

namespace scalebench {
namespace {

std::string size_text(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 3 && std::fmod(value, 1024) == 0) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  return text;
}

std::string number(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

void write_probe_file(const std::filesystem::path& path, const ProbeReport& report) {
  const auto temp = durable::temp_sibling(path);
  try {
    {
      const Hdf5Handle access = own_plist(HDF5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
      HDF5_CHECK(H5Pset_libver_bounds(access, H5F_LIBVER_V110, H5F_LIBVER_V110));
      const Hdf5Handle file =
          own_file(HDF5_CHECK(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access)));
      h5::write_string_attribute(file, "scalebench_probe_version", kProbeLayoutVersion);
      h5::write_string_attribute(file, "tool_version", std::string(build_info::kVersion));
      h5::write_string_attribute(file, "created", iso8601_utc_now());
      h5::write_string_attribute(file, "backend", report.backend);
      h5::write_string_attribute(file, "device", report.device);
      h5::write_int64_attribute(file, "world_size", report.world_size);
      h5::write_int64_attribute(file, "iterations", report.iterations);
      h5::write_int64_attribute(file, "warmup", report.warmup);
      h5::write_string_attribute(file, "hosts", nlohmann::json(report.hosts).dump());
      h5::write_string_attribute(file, "devices", nlohmann::json(report.devices).dump());
      const Hdf5Handle group = h5::create_group(file, "probe");
      const auto rows = static_cast<hsize_t>(report.rows.size());
      std::vector<std::string> operations;
      std::vector<std::vector<double>> columns(9);
      for (const auto& row : report.rows) {
        operations.push_back(row.operation);
        const double baseline = row.baseline_time_s < 0 ? std::numeric_limits<double>::quiet_NaN()
                                                        : row.baseline_time_s;
        const std::vector<double> values = {row.in_place ? 1.0 : 0.0,
                                            static_cast<double>(row.bytes),
                                            static_cast<double>(row.elements),
                                            row.time_s,
                                            row.algbw_gb_s,
                                            row.busbw_gb_s,
                                            row.max_error,
                                            row.ok ? 1.0 : 0.0,
                                            baseline};
        for (size_t c = 0; c < values.size(); ++c) columns[c].push_back(values[c]);
      }
      h5::write_string_dataset(group, "operation", operations);
      const char* names[] = {"in_place",   "bytes",     "elements", "time_s",         "algbw_gb_s",
                             "busbw_gb_s", "max_error", "ok",       "baseline_time_s"};
      for (size_t c = 0; c < columns.size(); ++c) {
        h5::write_double_dataset(group, names[c], {rows}, columns[c]);
      }
    }
    durable::commit_replace(temp, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
}

std::string format_probe_table(const ProbeReport& report) {
  std::ostringstream out;
  out << "# scalebench probe: " << report.world_size << " worker rank"
      << (report.world_size == 1 ? "" : "s") << ", backend " << report.backend << ", device "
      << report.device << ", " << report.iterations << " timed calls after " << report.warmup
      << " warm-up per size\n";
  if (report.world_size == 1) {
    out << "# one worker: the collectives move nothing between ranks (busbw 0); start "
           "mpirun with 3+ ranks\n";
  }
  const bool baseline = std::any_of(report.rows.begin(), report.rows.end(),
                                    [](const ProbeRow& row) { return row.baseline_time_s >= 0; });
  char line[256];
  std::snprintf(line, sizeof line, "#%10s %8s %9s %12s %12s %11s %11s %6s", "operation", "in-place",
                "size", "elements", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
  out << line << (baseline ? "   mpi(us)  vs mpi" : "") << "\n";
  for (const auto& row : report.rows) {
    std::snprintf(line, sizeof line, " %10s %8s %9s %12lld %12.2f %11.3f %11.3f %6s",
                  row.operation.c_str(), row.in_place ? "yes" : "no", size_text(row.bytes).c_str(),
                  static_cast<long long>(row.elements), row.time_s * 1e6, row.algbw_gb_s,
                  row.busbw_gb_s, row.ok ? "ok" : "WRONG");
    out << line;
    if (row.baseline_time_s >= 0) {
      out << number(" %9.2f", row.baseline_time_s * 1e6)
          << number(" %6.2fx", row.time_s / row.baseline_time_s);
    }
    out << "\n";
  }
  size_t wrong = 0;
  for (const auto& row : report.rows) wrong += row.ok ? 0 : 1;
  out << "# Check: "
      << (wrong == 0 ? "every result exact"
                     : std::to_string(wrong) + " of " + std::to_string(report.rows.size()) +
                           " results WRONG")
      << "\n";
  return out.str();
}

}  // namespace scalebench
