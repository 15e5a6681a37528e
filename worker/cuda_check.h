// CUDA_CHECK and NCCL_CHECK: the one check macro per library for CUDA runtime and NCCL
// calls. They throw scalebench::CudaError / NcclError (common/base/error.h) with host, rank,
// file:line, the failed expression and the library's own error text; NCCL errors also
// name the NCCL version (compiled against and loaded) and NCCL's last error message.
// Include only from *_cuda.cc files (compiled when SCALEBENCH_HAVE_CUDA).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/base/error.h"

namespace scalebench {

/// "NCCL 2.30.7 (headers 2.30.7)": the loaded library's version and the headers'.
inline std::string nccl_version_string() {
  int version = 0;
  std::string loaded = "unknown";
  if (ncclGetVersion(&version) == ncclSuccess) {
    // Since NCCL 2.9 the code is major*10000 + minor*100 + patch.
    loaded = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
             std::to_string(version % 100);
  }
  return "NCCL " + loaded + " (headers " + std::to_string(NCCL_MAJOR) + "." +
         std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH) + ")";
}

/// The text of an NCCL failure: NCCL's error string, its last error message and version.
inline std::string nccl_error_reason(ncclResult_t result) {
  std::string reason = ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') reason += " (" + std::string(last) + ")";
  return reason + "; " + nccl_version_string();
}

}  // namespace scalebench

#define CUDA_CHECK(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t scalebench_cuda_rc_ = (expr);                                                \
    if (scalebench_cuda_rc_ != cudaSuccess) {                                                      \
      throw ::scalebench::CudaError(                                                               \
          ::scalebench::format_library_error("CUDA", __FILE__, __LINE__, #expr,                    \
                                             std::string(cudaGetErrorName(scalebench_cuda_rc_)) +  \
                                                 ": " + cudaGetErrorString(scalebench_cuda_rc_))); \
    }                                                                                              \
  } while (false)

/// Throws unless the call returned ncclSuccess. For a non-blocking communicator, wrap
/// the call so that ncclInProgress is settled first (see NcclBackend::settle).
#define NCCL_CHECK(expr)                                                \
  do {                                                                  \
    const ncclResult_t scalebench_nccl_rc_ = (expr);                    \
    if (scalebench_nccl_rc_ != ncclSuccess) {                           \
      throw ::scalebench::NcclError(::scalebench::format_library_error( \
          "NCCL", __FILE__, __LINE__, #expr,                            \
          ::scalebench::nccl_error_reason(scalebench_nccl_rc_)));       \
    }                                                                   \
  } while (false)
