#include "worker/versions.h"

#include <torch/version.h>

#ifdef SCALEBENCH_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace scalebench {

std::map<std::string, std::string> library_versions() {
  std::map<std::string, std::string> versions{{"torch", TORCH_VERSION}, {"cuda", ""}, {"nccl", ""}};
#ifdef SCALEBENCH_HAVE_CUDA
  int cuda = 0;
  if (cudaRuntimeGetVersion(&cuda) == cudaSuccess && cuda > 0) {
    versions["cuda"] = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
  }
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess && nccl > 0) {
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
    versions["nccl"] = std::to_string(nccl / 10000) + "." + std::to_string((nccl % 10000) / 100) +
                       "." + std::to_string(nccl % 100);
  }
#endif
  return versions;
}

}  // namespace scalebench
