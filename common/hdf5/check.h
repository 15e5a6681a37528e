// HDF5_CHECK: the one check macro for HDF5 C API calls, and Hdf5Handle, the RAII owner
// of an HDF5 identifier.
//
// HDF5_CHECK(expr) evaluates `expr` once; a negative result (herr_t, hid_t, htri_t,
// hssize_t) throws scalebench::Hdf5Error with host, rank, file:line, the expression and
// HDF5's own error stack (walked with H5Ewalk2, then cleared). Otherwise it yields the
// value, so `hid_t file = HDF5_CHECK(H5Fopen(...))` works.
//
// HDF5 prints its error stack to stderr by default; `silence_hdf5_error_printing()`
// turns that off for the calling thread (the text goes into the exception instead).
// Every scalebench entry point into HDF5 calls it first.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

#include "common/base/error.h"

namespace scalebench {

/// HDF5's current error stack as text, the API call first, then its inner causes
/// ("H5Fopen(): unable to open file (...); H5F_open(): ...")
/// Clears the stack. "no HDF5 error stack" when it is empty.
std::string hdf5_error_stack_text();

/// Stops HDF5 from printing error stacks to stderr (idempotent, cheap).
void silence_hdf5_error_printing();

/// Owns one HDF5 identifier and closes it with the matching H5?close. Move-only. A
/// failing close in the destructor cannot throw; it is ignored (the id is invalid anyway).
class Hdf5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Hdf5Handle() = default;
  /// Takes ownership of `id` (which must be valid, >= 0).
  Hdf5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  Hdf5Handle(Hdf5Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  ~Hdf5Handle() { reset(); }

  [[nodiscard]] hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT(google-explicit-constructor): C API calls
  [[nodiscard]] bool valid() const { return id_ >= 0; }

  /// Closes now and throws Hdf5Error if HDF5 reports a failure (H5Fclose flushes: use
  /// this on files whose contents must be complete).
  void close();

 private:
  void reset() noexcept;
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

}  // namespace scalebench

#define HDF5_CHECK(expr)                                                              \
  ([&]() {                                                                            \
    const auto scalebench_hdf5_rc_ = (expr);                                          \
    if (scalebench_hdf5_rc_ < 0) {                                                    \
      throw ::scalebench::Hdf5Error(::scalebench::format_library_error(               \
          "HDF5", __FILE__, __LINE__, #expr, ::scalebench::hdf5_error_stack_text())); \
    }                                                                                 \
    return scalebench_hdf5_rc_;                                                       \
  }())

namespace scalebench {

/// Throws Hdf5Error unless `id` is valid; for ids that bypassed HDF5_CHECK.
hid_t require_valid_id(hid_t id, const char* what);

// Owning constructors, one per kind of identifier:
//   auto file = own_file(HDF5_CHECK(H5Fopen(...)));
#define SCALEBENCH_HDF5_OWNER(name, closer) \
  inline Hdf5Handle name(hid_t id) { return Hdf5Handle(require_valid_id(id, #name), closer); }
SCALEBENCH_HDF5_OWNER(own_file, H5Fclose)
SCALEBENCH_HDF5_OWNER(own_group, H5Gclose)
SCALEBENCH_HDF5_OWNER(own_dataset, H5Dclose)
SCALEBENCH_HDF5_OWNER(own_dataspace, H5Sclose)
SCALEBENCH_HDF5_OWNER(own_attribute, H5Aclose)
SCALEBENCH_HDF5_OWNER(own_plist, H5Pclose)
SCALEBENCH_HDF5_OWNER(own_datatype, H5Tclose)
SCALEBENCH_HDF5_OWNER(own_object, H5Oclose)  // any object opened with H5Oopen
#undef SCALEBENCH_HDF5_OWNER

}  // namespace scalebench
