// Thin typed helpers over the HDF5 C API for the results store: scalar attributes
// (variable-length UTF-8 strings, int64, int8 flags, float64), float64 and string
// datasets, and generic read-back as JSON. Every call goes through HDF5_CHECK and every
// id is owned by an Hdf5Handle.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/hdf5/check.h"

namespace scalebench::h5 {

/// Attributes an object keeps in its header before HDF5 moves them to a separate
/// ("dense") heap; scalebench objects have at most ~30, so they stay in the header.
inline constexpr unsigned kMaxCompactAttributes = 64;

/// Group creation properties of scalebench groups (compact attribute storage).
Hdf5Handle group_create_plist();
/// Creates group `name` in `location` with group_create_plist().
Hdf5Handle create_group(hid_t location, const std::string& name);

/// Variable-length UTF-8 string type (what every string attribute and dataset uses).
Hdf5Handle utf8_string_type();

/// Scalar attributes. An existing attribute of the same name is replaced (any type).
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_int64_attribute(hid_t object, const std::string& name, int64_t value);
void write_flag_attribute(hid_t object, const std::string& name, bool value);  ///< int8 0/1
void write_double_attribute(hid_t object, const std::string& name, double value);

/// Typed reads; throw Hdf5Error when missing or of another type class.
std::string read_string_attribute(hid_t object, const std::string& name);
int64_t read_int64_attribute(hid_t object, const std::string& name);

/// Any attribute as JSON: strings as strings, integers as int64, floats as double (NaN
/// becomes null when dumped), non-scalar numeric attributes as arrays.
nlohmann::json read_attribute(hid_t object, const std::string& name);
/// Names of the attributes of `object`, in name order.
std::vector<std::string> attribute_names(hid_t object);
/// Every attribute of `object`, by name. Throws Hdf5Error when one cannot be read.
nlohmann::json read_all_attributes(hid_t object);

/// True when `name` (a path relative to `location`, one level) is a link there.
bool has_link(hid_t location, const std::string& name);
/// Deletes the link `name` when present (the object's space is not reclaimed by HDF5).
void delete_link_if_present(hid_t location, const std::string& name);
/// Names of the links of group `group`, in name order.
std::vector<std::string> link_names(hid_t group);

/// Creates dataset `name` of float64 with shape `dims` from row-major `values`
/// (`values.size()` must equal the product of dims). `chunk` empty: contiguous; else
/// chunked with those chunk dims and gzip level `gzip_level` (0 = no filter). Returns it
/// (open) so that attributes can be attached.
Hdf5Handle write_double_dataset(hid_t location, const std::string& name,
                                const std::vector<hsize_t>& dims, const std::vector<double>& values,
                                const std::vector<hsize_t>& chunk = {}, int gzip_level = 0);
/// Creates dataset `name` of float32 with shape `dims` from row-major `values`, gzip-compressed
/// in one chunk (arrays of model outputs compress well and are read whole).
Hdf5Handle write_float_dataset(hid_t location, const std::string& name,
                               const std::vector<hsize_t>& dims, const std::vector<float>& values);
/// All values of a numeric dataset as float32, row-major.
std::vector<float> read_float_dataset(hid_t location, const std::string& name);
/// Creates a 1-D dataset of variable-length UTF-8 strings.
Hdf5Handle write_string_dataset(hid_t location, const std::string& name,
                                const std::vector<std::string>& values);

/// Shape of dataset `name`.
std::vector<hsize_t> dataset_dims(hid_t location, const std::string& name);
/// All values of a float64 dataset, row-major.
std::vector<double> read_double_dataset(hid_t location, const std::string& name);
/// All values of a 1-D string dataset.
std::vector<std::string> read_string_dataset(hid_t location, const std::string& name);

}  // namespace scalebench::h5
