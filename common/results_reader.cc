// read_results_overview (declared in common/results_store.h): the whole file minus the
// bulk datasets, as JSON.
#include <hdf5.h>

#include "common/h5_wrappers.h"
#include "common/hdf5_check.h"
#include "common/results_cells.h"
#include "common/results_store.h"

namespace scalebench {
namespace {

/// Replaces the JSON text of `object[key]` by its parsed value (kept as text if invalid).
void parse_json_member(nlohmann::json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_string()) return;
  auto parsed = nlohmann::json::parse(object[key].get<std::string>(), nullptr, false);
  if (!parsed.is_discarded()) object[key] = std::move(parsed);
}

nlohmann::json read_cell(hid_t cells, const std::string& id) {
  const Hdf5Handle cell = own_group(HDF5_CHECK(H5Gopen2(cells, id.c_str(), H5P_DEFAULT)));
  nlohmann::json out = h5::read_all_attributes(cell);
  parse_json_member(out, "spec");
  parse_json_member(out, "ranks");
  out["datasets"] = nlohmann::json::array();
  out["summary"] = nullptr;
  for (const auto& name : h5::link_names(cell)) {
    H5O_info_t info{};
    HDF5_CHECK(H5Oget_info_by_name(cell, name.c_str(), &info, H5P_DEFAULT));
    if (info.type == H5O_TYPE_DATASET) out["datasets"].push_back(name);
    if (info.type == H5O_TYPE_GROUP && name == "summary") {
      const Hdf5Handle summary = own_group(HDF5_CHECK(H5Gopen2(cell, "summary", H5P_DEFAULT)));
      out["summary"] = h5::read_all_attributes(summary);
    }
  }
  return out;
}

void require_readable(const std::filesystem::path& path) {
  if (!std::filesystem::exists(path)) {
    throw InputError("results file " + path.string() + " does not exist");
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError("results file " + path.string() + " is not an HDF5 file");
  }
}

}  // namespace

nlohmann::json read_results_overview(const std::filesystem::path& path) {
  silence_hdf5_error_printing();
  require_readable(path);
  const Hdf5Handle file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  nlohmann::json provenance = h5::read_all_attributes(file);
  if (!provenance.contains("scalebench_layout_version")) {
    throw InputError("results file " + path.string() +
                     " is not a scalebench results file (no root attribute "
                     "scalebench_layout_version)");
  }
  const std::string version = provenance["scalebench_layout_version"].get<std::string>();
  const std::string major = version.substr(0, version.find('.'));
  if (major != std::to_string(kResultsLayoutMajor)) {
    throw InputError("results file " + path.string() + " has layout version " + version +
                     ": required " + std::to_string(kResultsLayoutMajor) + ", found " + major);
  }
  for (const char* key : {"hosts", "devices", "argv", "environment"}) {
    parse_json_member(provenance, key);
  }
  nlohmann::json cells = nlohmann::json::object();
  const Hdf5Handle group = own_group(HDF5_CHECK(H5Gopen2(file, results::kCellsGroup, H5P_DEFAULT)));
  for (const auto& id : h5::link_names(group)) cells[id] = read_cell(group, id);
  return {{"path", path.string()},
          {"layout_version", version},
          {"provenance", std::move(provenance)},
          {"cells", std::move(cells)}};
}

}  // namespace scalebench
