#include "common/hdf5/wrappers.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace scalebench::h5 {
namespace {

Hdf5Handle scalar_space() { return own_dataspace(HDF5_CHECK(H5Screate(H5S_SCALAR))); }

/// Creates (replacing any old one) a scalar attribute and writes `data` as `memory_type`.
void write_scalar_attribute(hid_t object, const std::string& name, hid_t file_type,
                            hid_t memory_type, const void* data) {
  if (HDF5_CHECK(H5Aexists(object, name.c_str())) > 0) {
    HDF5_CHECK(H5Adelete(object, name.c_str()));
  }
  const Hdf5Handle space = scalar_space();
  const Hdf5Handle attribute = own_attribute(
      HDF5_CHECK(H5Acreate2(object, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT)));
  HDF5_CHECK(H5Awrite(attribute, memory_type, data));
}

Hdf5Handle open_attribute(hid_t object, const std::string& name) {
  return own_attribute(HDF5_CHECK(H5Aopen(object, name.c_str(), H5P_DEFAULT)));
}

size_t element_count(hid_t space);

std::string read_string_from_attribute(hid_t attribute) {
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Aget_space(attribute)));
  if (element_count(space) != 1) {  // H5Aread would write one string per element
    throw Hdf5Error(format_library_error("HDF5", __FILE__, __LINE__, "string attribute",
                                         "expected one string, found an array"));
  }
  const Hdf5Handle file_type = own_datatype(HDF5_CHECK(H5Aget_type(attribute)));
  if (HDF5_CHECK(H5Tis_variable_str(file_type)) > 0) {
    const Hdf5Handle memory_type = own_datatype(HDF5_CHECK(H5Tcopy(file_type)));  // same cset
    char* text = nullptr;
    HDF5_CHECK(H5Aread(attribute, memory_type, static_cast<void*>(&text)));
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(file_type);
  std::string buffer(size, '\0');
  HDF5_CHECK(H5Aread(attribute, file_type, buffer.data()));
  return buffer.substr(0, buffer.find('\0'));
}

size_t element_count(hid_t space) {
  return static_cast<size_t>(HDF5_CHECK(H5Sget_simple_extent_npoints(space)));
}

// HDF5 iteration callbacks only collect names: an exception must never unwind through
// the C library (it would terminate the process); the values are read afterwards.
herr_t collect_attribute_name(hid_t /*object*/, const char* name, const H5A_info_t* /*info*/,
                              void* client) {
  static_cast<std::vector<std::string>*>(client)->emplace_back(name);
  return 0;
}

herr_t collect_link(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* client) {
  static_cast<std::vector<std::string>*>(client)->emplace_back(name);
  return 0;
}

}  // namespace

Hdf5Handle group_create_plist() {
  Hdf5Handle plist = own_plist(HDF5_CHECK(H5Pcreate(H5P_GROUP_CREATE)));
  HDF5_CHECK(H5Pset_attr_phase_change(plist, kMaxCompactAttributes, kMaxCompactAttributes - 16));
  return plist;
}

Hdf5Handle create_group(hid_t location, const std::string& name) {
  const Hdf5Handle plist = group_create_plist();
  return own_group(HDF5_CHECK(H5Gcreate2(location, name.c_str(), H5P_DEFAULT, plist, H5P_DEFAULT)));
}

Hdf5Handle utf8_string_type() {
  Hdf5Handle type = own_datatype(HDF5_CHECK(H5Tcopy(H5T_C_S1)));
  HDF5_CHECK(H5Tset_size(type, H5T_VARIABLE));
  HDF5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

// Note [Fixed-length strings]
// Since layout 1.2 every string is written fixed-length (NUL-terminated UTF-8, as wide as
// the longest value + 1). A variable-length string lives in HDF5's global heap, the one
// structure of the file format without a checksum: fuzzing found libhdf5 1.10 reading past
// its buffer (H5HG_read) on a damaged global heap. A fixed-length value is stored in the
// object header or the attribute heap, which HDF5 checksums, so damage there is an error.
// The readers accept both (files of layouts 1.0 and 1.1 have variable-length strings).
Hdf5Handle fixed_utf8_string_type(size_t longest) {
  Hdf5Handle type = own_datatype(HDF5_CHECK(H5Tcopy(H5T_C_S1)));
  HDF5_CHECK(H5Tset_size(type, longest + 1));
  HDF5_CHECK(H5Tset_strpad(type, H5T_STR_NULLTERM));
  HDF5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const Hdf5Handle type = fixed_utf8_string_type(value.size());
  write_scalar_attribute(object, name, type, type, static_cast<const void*>(value.c_str()));
}

void write_int64_attribute(hid_t object, const std::string& name, int64_t value) {
  write_scalar_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_flag_attribute(hid_t object, const std::string& name, bool value) {
  const int8_t flag = value ? 1 : 0;
  write_scalar_attribute(object, name, H5T_STD_I8LE, H5T_NATIVE_INT8, &flag);
}

void write_double_attribute(hid_t object, const std::string& name, double value) {
  write_scalar_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  const Hdf5Handle attribute = open_attribute(object, name);
  const Hdf5Handle type = own_datatype(HDF5_CHECK(H5Aget_type(attribute)));
  if (H5Tget_class(type) != H5T_STRING) {
    throw Hdf5Error(format_library_error("HDF5", __FILE__, __LINE__, "attribute '" + name + "'",
                                         "expected a string attribute"));
  }
  return read_string_from_attribute(attribute);
}

int64_t read_int64_attribute(hid_t object, const std::string& name) {
  const Hdf5Handle attribute = open_attribute(object, name);
  const Hdf5Handle type = own_datatype(HDF5_CHECK(H5Aget_type(attribute)));
  if (H5Tget_class(type) != H5T_INTEGER) {
    throw Hdf5Error(format_library_error("HDF5", __FILE__, __LINE__, "attribute '" + name + "'",
                                         "expected an integer attribute"));
  }
  int64_t value = 0;
  HDF5_CHECK(H5Aread(attribute, H5T_NATIVE_INT64, &value));
  return value;
}

nlohmann::json read_attribute(hid_t object, const std::string& name) {
  const Hdf5Handle attribute = open_attribute(object, name);
  const Hdf5Handle type = own_datatype(HDF5_CHECK(H5Aget_type(attribute)));
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Aget_space(attribute)));
  const H5T_class_t type_class = H5Tget_class(type);
  if (type_class == H5T_STRING) return read_string_from_attribute(attribute);
  if (type_class != H5T_INTEGER && type_class != H5T_FLOAT) return nullptr;
  const size_t count = element_count(space);
  const bool scalar = HDF5_CHECK(H5Sget_simple_extent_ndims(space)) == 0;
  if (type_class == H5T_INTEGER) {
    std::vector<int64_t> values(count);
    HDF5_CHECK(H5Aread(attribute, H5T_NATIVE_INT64, values.data()));
    return scalar && count == 1 ? nlohmann::json(values.front()) : nlohmann::json(values);
  }
  std::vector<double> values(count);
  HDF5_CHECK(H5Aread(attribute, H5T_NATIVE_DOUBLE, values.data()));
  return scalar && count == 1 ? nlohmann::json(values.front()) : nlohmann::json(values);
}

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  hsize_t index = 0;
  HDF5_CHECK(
      H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute_name, &names));
  return names;
}

nlohmann::json read_all_attributes(hid_t object) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& name : attribute_names(object)) out[name] = read_attribute(object, name);
  return out;
}

bool has_link(hid_t location, const std::string& name) {
  return HDF5_CHECK(H5Lexists(location, name.c_str(), H5P_DEFAULT)) > 0;
}

void delete_link_if_present(hid_t location, const std::string& name) {
  if (has_link(location, name)) HDF5_CHECK(H5Ldelete(location, name.c_str(), H5P_DEFAULT));
}

std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> names;
  hsize_t index = 0;
  HDF5_CHECK(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &index, collect_link, &names));
  return names;
}

namespace {

/// A numeric dataset of `file_type` from row-major `values` of `memory_type` (T), optionally
/// chunked and compressed: the body of write_double_dataset and write_float_dataset.
template <typename T>
Hdf5Handle write_numeric_dataset(hid_t location, const std::string& name,
                                 const std::vector<hsize_t>& dims, const std::vector<T>& values,
                                 hid_t file_type, hid_t memory_type,
                                 const std::vector<hsize_t>& chunk, int gzip_level) {
  const hsize_t total = std::accumulate(dims.begin(), dims.end(), hsize_t{1}, std::multiplies<>());
  if (total != values.size()) {
    throw Hdf5Error(format_library_error("HDF5", __FILE__, __LINE__, "dataset '" + name + "'",
                                         "value count does not match the shape"));
  }
  const Hdf5Handle space = own_dataspace(
      HDF5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  const Hdf5Handle create = own_plist(HDF5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  if (!chunk.empty()) {
    HDF5_CHECK(H5Pset_chunk(create, static_cast<int>(chunk.size()), chunk.data()));
    if (gzip_level > 0) {
      HDF5_CHECK(H5Pset_shuffle(create));
      HDF5_CHECK(H5Pset_deflate(create, static_cast<unsigned>(gzip_level)));
    }
  }
  Hdf5Handle dataset = own_dataset(HDF5_CHECK(
      H5Dcreate2(location, name.c_str(), file_type, space, H5P_DEFAULT, create, H5P_DEFAULT)));
  if (total > 0) {
    HDF5_CHECK(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  }
  return dataset;
}

/// Every value of a numeric dataset, converted by HDF5 to `memory_type` (T), row-major.
template <typename T>
std::vector<T> read_numeric_dataset(hid_t location, const std::string& name, hid_t memory_type) {
  const Hdf5Handle dataset = own_dataset(HDF5_CHECK(H5Dopen2(location, name.c_str(), H5P_DEFAULT)));
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Dget_space(dataset)));
  std::vector<T> values(element_count(space));
  if (!values.empty()) {
    HDF5_CHECK(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  }
  return values;
}

}  // namespace

Hdf5Handle write_double_dataset(hid_t location, const std::string& name,
                                const std::vector<hsize_t>& dims, const std::vector<double>& values,
                                const std::vector<hsize_t>& chunk, int gzip_level) {
  return write_numeric_dataset(location, name, dims, values, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                               chunk, gzip_level);
}

Hdf5Handle write_float_dataset(hid_t location, const std::string& name,
                               const std::vector<hsize_t>& dims, const std::vector<float>& values) {
  // One chunk of the whole array (read whole), gzip: model outputs compress well.
  const bool chunked = !dims.empty() && !values.empty();
  return write_numeric_dataset(location, name, dims, values, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                               chunked ? dims : std::vector<hsize_t>{}, 4);
}

std::vector<float> read_float_dataset(hid_t location, const std::string& name) {
  return read_numeric_dataset<float>(location, name, H5T_NATIVE_FLOAT);
}

Hdf5Handle write_string_dataset(hid_t location, const std::string& name,
                                const std::vector<std::string>& values) {
  const hsize_t dims[1] = {values.size()};
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Screate_simple(1, dims, nullptr)));
  size_t longest = 0;
  for (const auto& v : values) longest = std::max(longest, v.size());
  const Hdf5Handle type = fixed_utf8_string_type(longest);  // Note [Fixed-length strings]
  Hdf5Handle dataset = own_dataset(HDF5_CHECK(
      H5Dcreate2(location, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  std::string packed(values.size() * (longest + 1), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    std::copy(values[i].begin(), values[i].end(),
              packed.begin() + static_cast<std::ptrdiff_t>(i * (longest + 1)));
  }
  if (!values.empty()) {
    HDF5_CHECK(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, packed.data()));
  }
  return dataset;
}

std::vector<hsize_t> dataset_dims(hid_t location, const std::string& name) {
  const Hdf5Handle dataset = own_dataset(HDF5_CHECK(H5Dopen2(location, name.c_str(), H5P_DEFAULT)));
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Dget_space(dataset)));
  std::vector<hsize_t> dims(static_cast<size_t>(HDF5_CHECK(H5Sget_simple_extent_ndims(space))));
  HDF5_CHECK(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return dims;
}

std::vector<double> read_double_dataset(hid_t location, const std::string& name) {
  return read_numeric_dataset<double>(location, name, H5T_NATIVE_DOUBLE);
}

std::vector<std::string> read_string_dataset(hid_t location, const std::string& name) {
  const Hdf5Handle dataset = own_dataset(HDF5_CHECK(H5Dopen2(location, name.c_str(), H5P_DEFAULT)));
  const Hdf5Handle space = own_dataspace(HDF5_CHECK(H5Dget_space(dataset)));
  const Hdf5Handle file_type = own_datatype(HDF5_CHECK(H5Dget_type(dataset)));
  if (H5Tget_class(file_type) != H5T_STRING) {
    throw Hdf5Error(format_library_error("HDF5", __FILE__, __LINE__, "dataset '" + name + "'",
                                         "expected strings"));
  }
  if (HDF5_CHECK(H5Tis_variable_str(file_type)) == 0) {  // Note [Fixed-length strings]
    const size_t width = H5Tget_size(file_type);
    const size_t count = element_count(space);
    std::string packed(count * width, '\0');
    if (count > 0) {
      HDF5_CHECK(H5Dread(dataset, file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, packed.data()));
    }
    std::vector<std::string> values;
    values.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const std::string field = packed.substr(i * width, width);
      values.push_back(field.substr(0, field.find('\0')));
    }
    return values;
  }
  const Hdf5Handle type = utf8_string_type();
  std::vector<char*> pointers(element_count(space), nullptr);
  if (pointers.empty()) return {};
  HDF5_CHECK(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()));
  std::vector<std::string> values;
  values.reserve(pointers.size());
  for (char* p : pointers) values.emplace_back(p != nullptr ? p : "");
  HDF5_CHECK(H5Dvlen_reclaim(type, space, H5P_DEFAULT, pointers.data()));
  return values;
}

}  // namespace scalebench::h5
