#include "common/hdf5/check.h"

#include <sstream>

namespace scalebench {
namespace {

herr_t append_error_entry(unsigned depth, const H5E_error2_t* entry, void* client) {
  auto& out = *static_cast<std::ostringstream*>(client);
  if (depth > 0) out << "; ";
  out << (entry->func_name != nullptr ? entry->func_name : "?") << "()";
  if (entry->desc != nullptr && entry->desc[0] != '\0') out << ": " << entry->desc;
  char minor[256] = {};
  if (H5Eget_msg(entry->min_num, nullptr, minor, sizeof(minor)) > 0) out << " (" << minor << ")";
  return 0;
}

}  // namespace

std::string hdf5_error_stack_text() {
  std::ostringstream out;
  if (H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, append_error_entry, &out) < 0 || out.str().empty()) {
    H5Eclear2(H5E_DEFAULT);
    return "no HDF5 error stack";
  }
  H5Eclear2(H5E_DEFAULT);
  return out.str();
}

void silence_hdf5_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

hid_t require_valid_id(hid_t id, const char* what) {
  if (id < 0) {
    throw Hdf5Error(
        format_library_error("HDF5", __FILE__, __LINE__, what, hdf5_error_stack_text()));
  }
  return id;
}

void Hdf5Handle::close() {
  if (id_ < 0) return;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  HDF5_CHECK(closer_(id));
}

void Hdf5Handle::reset() noexcept {
  if (id_ >= 0 && closer_ != nullptr) closer_(id_);
  id_ = H5I_INVALID_HID;
}

}  // namespace scalebench
