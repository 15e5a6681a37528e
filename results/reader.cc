// read_results_overview: the whole file minus the bulk datasets, as JSON, every part
// checked. See Note [Reading damaged files].
#include "results/reader.h"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>

#include "common/cell/stats.h"
#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/cells.h"
#include "results/store.h"

namespace scalebench {
namespace {

// Note [Reading damaged files]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A results file may be truncated (a copy cut short, a full disk before the durability
// protocol existed), edited by hand, or written by a buggy tool. Every read checks what it
// reads: the type of each attribute it uses, a spec that parses into a CellSpec, a known
// status. A file HDF5 cannot open, without a string layout version or without /cells is
// refused as a whole (InputError: one line, exit 2). Any other problem is confined to what
// it damages: a cell that fails a check is left out of "cells" and listed under
// "damaged_cells" with one line saying why; an unreadable root attribute is listed under
// "problems". Readers show what is readable and the damage; writers (`run --resume`)
// refuse a file with any damage, before writing to it.

/// A cell's damage, one line: thrown inside read_cell, caught per cell.
struct CellDamage {
  std::string problem;
};

/// Root attributes and their JSON type; others are read as they are.
const std::pair<const char*, nlohmann::json::value_t> kRootAttributeTypes[] = {
    {"tool_version", nlohmann::json::value_t::string},
    {"matrix_hash", nlohmann::json::value_t::string},
    {"start_time", nlohmann::json::value_t::string},
    {"end_time", nlohmann::json::value_t::string},
    {"run_count", nlohmann::json::value_t::number_integer},
    {"mpi_size", nlohmann::json::value_t::number_integer},
};

/// Replaces the JSON text of `object[key]` by its parsed value (kept as text if invalid).
void parse_json_member(nlohmann::json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_string()) return;
  auto parsed = nlohmann::json::parse(object[key].get<std::string>(), nullptr, false);
  if (!parsed.is_discarded()) object[key] = std::move(parsed);
}

/// Every attribute of `object`; `unreadable` gets the names HDF5 cannot read.
nlohmann::json read_attributes(hid_t object, std::vector<std::string>& unreadable) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& name : h5::attribute_names(object)) {
    try {
      out[name] = h5::read_attribute(object, name);
    } catch (const Error&) {
      unreadable.push_back(name);
    }
  }
  return out;
}

/// The string attribute `key` of a cell, or CellDamage.
std::string cell_string(const nlohmann::json& attributes, const char* key, bool required) {
  if (!attributes.contains(key)) {
    if (required) throw CellDamage{std::string("attribute '") + key + "' is missing"};
    return "";
  }
  if (!attributes.at(key).is_string()) {
    throw CellDamage{std::string("attribute '") + key + "' is not a string"};
  }
  return attributes.at(key).get<std::string>();
}

/// Checks the spec of cell `id`: JSON of a CellSpec (cell_spec_from_json) of this id.
void check_spec(const std::string& id, const std::string& text) {
  const auto spec = nlohmann::json::parse(text, nullptr, false);
  if (spec.is_discarded()) throw CellDamage{"attribute 'spec' is not valid JSON"};
  try {
    const CellSpec parsed = cell_spec_from_json(spec);
    if (!parsed.cell_id.empty() && parsed.cell_id != id) {
      throw CellDamage{"attribute 'spec' belongs to cell " + parsed.cell_id};
    }
  } catch (const InputError& e) {
    throw CellDamage{"attribute 'spec' is not a cell's spec (" + std::string(e.what()) + ")"};
  }
}

/// The median over the ranks that reported metric `name` (read_rank_metrics leaves out the
/// NaN of a rank that did not); nullopt when none did.
std::optional<double> median_over_ranks(const std::vector<std::map<std::string, double>>& ranks,
                                        const std::string& name) {
  std::vector<double> column;
  for (const auto& rank : ranks) {
    if (const auto it = rank.find(name); it != rank.end()) column.push_back(it->second);
  }
  if (column.empty()) return std::nullopt;
  return percentile(std::move(column), 50.0);
}

/// MFU's inputs (results/model_flops.h) into `out`: `model_flops` (the median over
/// ranks of each FLOPs metric the ranks reported) and `device_name` (the first rank's
/// device). Optional figures: a cell without them, or damaged there, only has no MFU.
void read_model_flops(hid_t cell, nlohmann::json& out) {
  out["model_flops"] = nlohmann::json::object();
  out["device_name"] = "";
  try {
    const auto ranks = results::read_rank_metrics(cell);
    for (const char* name : {"flops_per_sample", "train_flops_per_sample"}) {
      if (const auto value = median_over_ranks(ranks, name)) out["model_flops"][name] = *value;
    }
    if (h5::has_link(cell, "rank_devices")) {
      for (const auto& device : h5::read_string_dataset(cell, "rank_devices")) {
        if (!device.empty()) {
          out["device_name"] = device;
          break;
        }
      }
    }
  } catch (const std::exception&) {
    H5Eclear2(H5E_DEFAULT);
    out["model_flops"] = nlohmann::json::object();
    out["device_name"] = "";
  }
}

/// Note [Run-level segments] (program/program_report.h): a program cell's
/// `program_times`, the median over ranks of its wall time, launch to the first step, the
/// steps' span, the time after the last step, and each named segment's total; absent for
/// other cells. Optional figures, as read_model_flops's.
void read_program_times(hid_t cell, nlohmann::json& out) {
  try {
    const auto ranks = results::read_rank_metrics(cell);
    const auto median = [&ranks](const std::string& name) {
      return median_over_ranks(ranks, name);
    };
    const auto wall = median("loop_wall_s");
    const auto steps = median("program_steps_span_s");
    if (!wall || !steps) return;
    nlohmann::json times{{"wall_s", *wall}, {"steps_s", *steps}};
    for (const char* name : {"program_startup_s", "program_after_steps_s"}) {
      if (const auto value = median(name)) times[name] = *value;
    }
    nlohmann::json segments = nlohmann::json::object();
    static constexpr std::string_view kPrefix = "segment_";
    static constexpr std::string_view kSuffix = "_s";
    for (const auto& [name, value] :
         ranks.empty() ? std::map<std::string, double>{} : ranks.front()) {
      if (name.starts_with(kPrefix) && name.ends_with(kSuffix) &&
          name.size() > kPrefix.size() + kSuffix.size()) {
        if (const auto total = median(name)) {
          segments[name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size())] =
              *total;
        }
      }
    }
    times["segments"] = segments;
    out["program_times"] = times;
  } catch (const std::exception&) {
    H5Eclear2(H5E_DEFAULT);
  }
}

nlohmann::json read_cell(hid_t cells, const std::string& id) {
  std::optional<Hdf5Handle> cell;
  try {
    cell.emplace(own_group(HDF5_CHECK(H5Gopen2(cells, id.c_str(), H5P_DEFAULT))));
  } catch (const Error&) {
    throw CellDamage{"its group cannot be opened"};
  }
  std::vector<std::string> unreadable;
  nlohmann::json out;
  try {
    out = read_attributes(*cell, unreadable);
  } catch (const Error&) {
    throw CellDamage{"its attributes cannot be listed"};
  }
  if (!unreadable.empty())
    throw CellDamage{"attribute '" + unreadable.front() + "' cannot be read"};
  const std::string status = cell_string(out, "status", true);
  if (!parse_cell_status(status)) {
    throw CellDamage{"status '" + status + "' is not one of scalebench's statuses"};
  }
  check_spec(id, cell_string(out, "spec", true));
  cell_string(out, "reason", false);
  cell_string(out, "failed_phase", false);
  parse_json_member(out, "spec");
  parse_json_member(out, "ranks");
  parse_json_member(out, "ineffective_reasons");
  parse_json_member(out, "untrusted_reasons");
  out["datasets"] = nlohmann::json::array();
  out["summary"] = nullptr;
  out["accuracy"] = nullptr;  // since 1.3 (Note [Accuracy validation])
  std::vector<std::string> links;
  try {
    links = h5::link_names(*cell);
  } catch (const Error&) {
    throw CellDamage{"its datasets cannot be listed"};
  }
  for (const auto& name : links) {
    H5O_info_t info{};
    if (H5Oget_info_by_name(*cell, name.c_str(), &info, H5P_DEFAULT) < 0) {
      H5Eclear2(H5E_DEFAULT);
      throw CellDamage{"'" + name + "' cannot be read"};
    }
    if (info.type == H5O_TYPE_DATASET) out["datasets"].push_back(name);
    if (info.type == H5O_TYPE_GROUP && (name == "summary" || name == "accuracy")) {
      try {
        const Hdf5Handle group = own_group(HDF5_CHECK(H5Gopen2(*cell, name.c_str(), H5P_DEFAULT)));
        out[name] = read_attributes(group, unreadable);
      } catch (const Error&) {
        throw CellDamage{"its " + name + " cannot be read"};
      }
      if (!unreadable.empty()) {
        throw CellDamage{name + " attribute '" + unreadable.front() + "' cannot be read"};
      }
    }
  }
  if (out["accuracy"].is_object()) parse_json_member(out["accuracy"], "failed_checks");
  read_model_flops(*cell, out);
  read_program_times(*cell, out);
  return out;
}

/// The version byte of the file's HDF5 superblock (its signature at offset 0 or at a
/// power of two from 512 on), or nullopt when there is none in the first 64 KiB.
std::optional<int> superblock_version(const std::filesystem::path& path) {
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  std::ifstream in(path, std::ios::binary);
  std::array<char, 9> head{};
  for (std::streamoff offset = 0; offset <= 65536; offset = offset == 0 ? 512 : offset * 2) {
    in.clear();
    in.seekg(offset);
    if (!in.read(head.data(), head.size())) return std::nullopt;
    if (std::equal(head.begin(), head.begin() + 8, kSignature)) {
      return static_cast<unsigned char>(head[8]);
    }
  }
  return std::nullopt;
}

// Note [Only checksummed files are parsed]
// scalebench has always written results with the HDF5 1.10 format (superblock version 3),
// whose metadata (superblock, object headers, B-trees, heaps of attributes) carries
// checksums that HDF5 verifies while reading: a damaged byte there is an error, not a
// crash. Files of the old format (superblock 0 or 1, e.g. written by h5py's defaults) have
// no checksums, and fuzzing showed libhdf5 1.10 crashing on damaged ones (a SEGV in
// H5A__close); those were never written by scalebench, so the readers refuse them before
// HDF5 parses anything.
void require_readable(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    throw InputError("results file " + path.string() + " does not exist");
  }
  const auto version = superblock_version(path);
  if (!version || H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError("results file " + path.string() + " is not an HDF5 file");
  }
  if (*version < 2) {
    throw InputError("results file " + path.string() +
                     " is not a scalebench results file: its HDF5 superblock is version " +
                     std::to_string(*version) +
                     " (no metadata checksums); scalebench writes version 3");
  }
}

/// InputError for a file that cannot be read as a whole: `what` says which part.
[[noreturn]] void refuse_damaged(const std::filesystem::path& path, const std::string& what) {
  throw InputError("results file " + path.string() + " is damaged: " + what +
                   " (truncated or overwritten?); nothing was changed. Use a backup copy, or "
                   "start a new results file");
}

/// Layout version string of the open root, or InputError.
std::string layout_version(const nlohmann::json& root, const std::filesystem::path& path) {
  if (!root.contains("scalebench_layout_version")) {
    throw InputError("results file " + path.string() +
                     " is not a scalebench results file (no root attribute "
                     "scalebench_layout_version)");
  }
  if (!root.at("scalebench_layout_version").is_string()) {
    throw InputError("results file " + path.string() +
                     " is not a scalebench results file (its root attribute "
                     "scalebench_layout_version is not a string)");
  }
  std::string version = root.at("scalebench_layout_version").get<std::string>();
  const std::string major = version.substr(0, version.find('.'));
  if (major != std::to_string(kResultsLayoutMajor)) {
    throw InputError("results file " + path.string() + " has layout version " + version +
                     ": required " + std::to_string(kResultsLayoutMajor) + ", found " + major);
  }
  return version;
}

}  // namespace

nlohmann::json read_results_overview(const std::filesystem::path& path) {
  silence_hdf5_error_printing();
  require_readable(path);
  std::optional<Hdf5Handle> file;
  try {
    file.emplace(own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT))));
  } catch (const Hdf5Error&) {
    refuse_damaged(path, "HDF5 cannot open it");
  }
  std::vector<std::string> unreadable;
  nlohmann::json provenance;
  try {
    provenance = read_attributes(*file, unreadable);
  } catch (const Error&) {
    refuse_damaged(path, "its root attributes cannot be listed");
  }
  if (std::find(unreadable.begin(), unreadable.end(), "scalebench_layout_version") !=
      unreadable.end()) {
    refuse_damaged(path, "its root attribute scalebench_layout_version cannot be read");
  }
  const std::string version = layout_version(provenance, path);
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& name : unreadable) {
    problems.push_back("root attribute '" + name + "' cannot be read");
  }
  for (const auto& [key, type] : kRootAttributeTypes) {
    if (!provenance.contains(key)) {
      problems.push_back(std::string("root attribute '") + key + "' is missing");
    } else if (provenance.at(key).type() != type) {
      problems.push_back(std::string("root attribute '") + key + "' has the wrong type");
    }
  }
  for (const char* key : {"hosts", "devices", "argv", "environment"}) {
    parse_json_member(provenance, key);
  }
  nlohmann::json cells = nlohmann::json::object();
  nlohmann::json damaged = nlohmann::json::object();
  std::vector<std::string> ids;
  std::optional<Hdf5Handle> group;
  try {
    group.emplace(own_group(HDF5_CHECK(H5Gopen2(*file, results::kCellsGroup, H5P_DEFAULT))));
    ids = h5::link_names(*group);
  } catch (const Hdf5Error&) {
    refuse_damaged(path, "its /cells group cannot be read");
  }
  for (const auto& id : ids) {
    try {
      cells[id] = read_cell(*group, id);
    } catch (const CellDamage& damage) {
      damaged[id] = damage.problem;
    }
  }
  return {{"path", path.string()},    {"layout_version", version},
          {"provenance", provenance}, {"cells", std::move(cells)},
          {"damaged_cells", damaged}, {"problems", std::move(problems)}};
}

std::string describe_damage(const nlohmann::json& overview) {
  std::string text;
  for (const auto& problem : overview.value("problems", nlohmann::json::array())) {
    text += (text.empty() ? "" : "; ") + problem.get<std::string>();
  }
  const nlohmann::json damaged_cells = overview.value("damaged_cells", nlohmann::json::object());
  for (const auto& [id, problem] : damaged_cells.items()) {
    text +=
        (text.empty() ? "" : "; ") + std::string("cell ") + id + ": " + problem.get<std::string>();
  }
  return text;
}

}  // namespace scalebench
