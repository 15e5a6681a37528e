#include "worker/aoti_model.h"

#include <torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base/error.h"
#include "common/cell/output_comparison.h"

#if __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>) && \
    (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6))
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#define SCALEBENCH_HAVE_AOTI 1
#endif

namespace scalebench {
namespace {

#ifdef SCALEBENCH_HAVE_AOTI

/// A private temporary copy of the package (the loader reads a path), removed with it.
class PackageFile {
 public:
  explicit PackageFile(const std::string& bytes) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "scalebench-aoti-XXXXXX.pt2").string();
    const int fd = ::mkstemps(pattern.data(), 4);
    if (fd < 0) {
      throw CellError(FailurePhase::kModelInit, "cannot create a temporary file for the package");
    }
    ::close(fd);
    path_ = pattern;
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      throw CellError(FailurePhase::kModelInit,
                      "cannot write the package to " + path_.string() + " (disk full?)");
    }
  }
  PackageFile(const PackageFile&) = delete;
  PackageFile& operator=(const PackageFile&) = delete;
  ~PackageFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class AotiModel : public models::ZooModel {
 public:
  /// `flops_per_sample` receives the package's metadata scalebench.flops_per_sample (NaN
  /// when it has none).
  AotiModel(const std::string& bytes, std::string source, double& flops_per_sample)
      : source_(std::move(source)) {
    const PackageFile file(bytes);  // the loader unpacks what it needs while constructed
    try {
      loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(file.path().string());
      const auto metadata = loader_->get_metadata();
      if (const auto it = metadata.find("AOTI_DEVICE_KEY"); it != metadata.end()) {
        device_ = it->second;
      }
      if (const auto it = metadata.find("scalebench.flops_per_sample"); it != metadata.end()) {
        char* end = nullptr;
        const double flops = std::strtod(it->second.c_str(), &end);
        if (end != it->second.c_str() && flops > 0) flops_per_sample = flops;
      }
      if (const auto it = metadata.find("scalebench.input_shape"); it != metadata.end()) {
        exported_shape_ = it->second;
        const auto parsed = nlohmann::json::parse(it->second, nullptr, false);
        if (parsed.is_array()) {
          for (const auto& dim : parsed) {
            if (dim.is_number_integer()) exported_dims_.push_back(dim.get<int64_t>());
          }
        }
      }
    } catch (const c10::Error& error) {
      throw CellError(FailurePhase::kModelInit,
                      "AOTInductor package " + source_ + " cannot be loaded by this LibTorch (" +
                          std::string(TORCH_VERSION) + "): " + error.what_without_backtrace() +
                          "; export it with torch._inductor.aoti_compile_and_package from the "
                          "same PyTorch version (python -m scalebench_client.export)");
    }
  }

  torch::Tensor forward(torch::Tensor input) override {
    const std::string device = input.device().is_cuda() ? "cuda" : "cpu";
    if (!device_.empty() && device_ != device) {
      throw CellError(FailurePhase::kModelInit,
                      "AOTInductor package " + source_ + " was compiled for " + device_ +
                          " and this cell runs on " + device +
                          ": export it on the cell's device (or set device: " + device_ + ")");
    }
    // A compiled CPU kernel does not check its input's shape: a static batch given another
    // batch would read past its input. So the exported shape is checked here.
    if (!exported_dims_.empty() && !fits_exported_shape(input.sizes())) {
      refuse(input.sizes(), "it does not fit the exported shape");
    }
    std::vector<at::Tensor> outputs;
    try {
      outputs = loader_->run({input.contiguous()});
    } catch (const c10::Error& error) {
      refuse(input.sizes(), error.what_without_backtrace());
    }
    if (outputs.empty()) {
      throw CellError(FailurePhase::kForward,
                      "AOTInductor package " + source_ + " returned no output");
    }
    if (outputs.front().dim() == 0 || outputs.front().size(0) != input.size(0)) {
      refuse(input.sizes(), "it returned " + shape_text(outputs.front().sizes().vec()) +
                                ", not one row per input sample");
    }
    return outputs.front();
  }

  [[nodiscard]] bool fits_exported_shape(at::IntArrayRef shape) const {
    if (shape.size() != exported_dims_.size()) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (exported_dims_[d] >= 0 && exported_dims_[d] != shape[d]) return false;
    }
    return true;
  }

  [[noreturn]] void refuse(at::IntArrayRef shape, const std::string& why) const {
    throw CellError(FailurePhase::kForward,
                    "AOTInductor package " + source_ + " refused an input of shape " +
                        shape_text(shape.vec()) +
                        (exported_shape_.empty()
                             ? std::string(" (the package does not record its exported shape)")
                             : " (exported shape " + exported_shape_ + ", -1 = dynamic)") +
                        ": " + why +
                        "; export with a dynamic batch dimension (dynamic_shapes={0: "
                        "torch.export.Dim(\"batch\")}; python -m scalebench_client.export does "
                        "unless --static-batch) or run the exported batch size");
  }

  /// The weights are compiled into the package: nothing for a checkpoint to replace.
  models::NamedState state_entries() override { return {}; }

 private:
  std::string source_;
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> loader_;
  std::string device_;
  std::string exported_shape_;          ///< metadata scalebench.input_shape as written
  std::vector<int64_t> exported_dims_;  ///< the same, parsed; -1 = dynamic
};

#endif  // SCALEBENCH_HAVE_AOTI

}  // namespace

bool aoti_available() {
#ifdef SCALEBENCH_HAVE_AOTI
  return true;
#else
  return false;
#endif
}

ModelInfo aoti_model_info(const CellSpec& cell, std::string artifact) {
  ModelInfo info;
  info.name = "aoti:" + cell.model.aoti;
  info.default_input_shape = cell.input_shape;
  info.default_num_classes = cell.num_classes;
  info.check = [source = cell.model.aoti](const std::vector<int64_t>& shape, int64_t) {
    if (shape.empty()) {
      throw InputError("AOTInductor package " + source + " needs input_shape in the matrix");
    }
  };
  // The package's own FLOP count (python -m scalebench_client.export records it), known once
  // `build` loaded it: NaN until then and for packages without one.
  auto flops = std::make_shared<double>(std::numeric_limits<double>::quiet_NaN());
  info.forward_flops_per_sample = [flops](const std::vector<int64_t>&, int64_t) { return *flops; };
  info.build = [bytes = std::move(artifact), source = cell.model.aoti, flops](
                   const std::vector<int64_t>&, int64_t) -> std::shared_ptr<models::ZooModel> {
#ifdef SCALEBENCH_HAVE_AOTI
    if (bytes.empty()) {
      throw CellError(FailurePhase::kModelInit,
                      "AOTInductor package " + source + ": rank 0 sent no bytes (an empty file?)");
    }
    return std::make_shared<AotiModel>(bytes, source, *flops);
#else
    throw CellError(FailurePhase::kModelInit,
                    "AOTInductor package " + source + ": this build's LibTorch (" +
                        std::string(TORCH_VERSION) +
                        ") has no AOTIModelPackageLoader (PyTorch 2.6 or later); rebuild "
                        "scalebench against a newer LibTorch or use {torchscript: path}");
#endif
  };
  info.make_sample = make_normal_sample;
  return info;
}

}  // namespace scalebench
