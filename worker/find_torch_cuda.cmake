# Finds LibTorch and decides whether the CUDA + NCCL code of the worker is compiled.
#
# Sets SCALEBENCH_HAVE_CUDA (ON when LibTorch was built with CUDA and the CUDA toolkit
# is found) and, then, the imported target scalebench::nccl. NCCL is taken from the
# same place LibTorch loads it from (the pip wheel nvidia-nccl-*) when present, so one
# process never loads two NCCL versions; otherwise from the CUDA toolkit.
# The worker has no .cu files; a fixed arch list stops Caffe2's config from try-running
# a GPU probe (which fails with CMake 3.25 + nvcc 13 and on machines without a GPU).
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "8.0;9.0" CACHE STRING "CUDA archs passed to Caffe2's config")
endif()
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR}")

set(SCALEBENCH_HAVE_CUDA OFF)
if(TARGET torch_cuda OR "${TORCH_LIBRARIES}" MATCHES "torch_cuda")
  find_package(CUDAToolkit)
  if(CUDAToolkit_FOUND)
    get_filename_component(_torch_site "${Torch_DIR}/../../../.." ABSOLUTE)
    find_path(SCALEBENCH_NCCL_INCLUDE_DIR nccl.h
      HINTS "${_torch_site}/nvidia/nccl/include" ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
    find_library(SCALEBENCH_NCCL_LIBRARY NAMES libnccl.so.2 nccl NAMES_PER_DIR
      HINTS "${_torch_site}/nvidia/nccl/lib" "${CUDAToolkit_LIBRARY_DIR}" NO_DEFAULT_PATH)
    if(SCALEBENCH_NCCL_INCLUDE_DIR AND SCALEBENCH_NCCL_LIBRARY)
      add_library(scalebench::nccl UNKNOWN IMPORTED)
      set_target_properties(scalebench::nccl PROPERTIES
        IMPORTED_LOCATION "${SCALEBENCH_NCCL_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${SCALEBENCH_NCCL_INCLUDE_DIR}")
      set(SCALEBENCH_HAVE_CUDA ON)
      message(STATUS "CUDA ${CUDAToolkit_VERSION}; NCCL ${SCALEBENCH_NCCL_LIBRARY} (headers ${SCALEBENCH_NCCL_INCLUDE_DIR}): GPU code is compiled")
    else()
      message(WARNING "LibTorch has CUDA but NCCL was not found: GPU code is not compiled")
    endif()
  endif()
endif()
if(NOT SCALEBENCH_HAVE_CUDA)
  message(STATUS "GPU code (CUDA events, NCCL) is not compiled: CPU-only build")
endif()
