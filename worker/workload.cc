#include "worker/workload.h"

#include <ATen/autocast_mode.h>

#include "common/base/error.h"
#include "worker/aoti_model.h"
#include "worker/compiled_twin.h"
#include "worker/scripted_model.h"

namespace scalebench {

ResolvedModel resolve_model(const CellSpec& cell, std::string artifact) {
  ResolvedModel resolved;
  if (!cell.model.aoti.empty()) {  // the package's bytes, as for TorchScript
    resolved.info = std::make_shared<const ModelInfo>(aoti_model_info(cell, std::move(artifact)));
  } else if (!cell.model.torchscript.empty()) {
    if (artifact.empty()) {
      throw CellError(FailurePhase::kModelInit,
                      "TorchScript model " + cell.model.torchscript +
                          ": the assignment carries no module bytes (rank 0 reads "
                          "the file from the branch tree at dispatch)");
    }
    resolved.info =
        std::make_shared<const ModelInfo>(scripted_model_info(cell, std::move(artifact)));
  } else if (cell.compile != CellSpec{}.compile) {  // Note [Compiled twins]
    resolved.info =
        std::make_shared<const ModelInfo>(compiled_twin_info(cell, std::move(artifact)));
  } else {
    // The zoo's entries live as long as the process: share without ownership.
    resolved.info = std::shared_ptr<const ModelInfo>(std::shared_ptr<const ModelInfo>{},
                                                     &find_model(cell.model.zoo));
  }
  resolved.input_shape =
      cell.input_shape.empty() ? resolved.info->default_input_shape : cell.input_shape;
  resolved.num_classes =
      cell.num_classes == 0 ? resolved.info->default_num_classes : cell.num_classes;
  resolved.info->check(resolved.input_shape, resolved.num_classes);
  return resolved;
}

void check_precision(Precision precision, const torch::Device& device) {
  if (precision == Precision::kFp16 && device.is_cpu()) {
    throw CellError(FailurePhase::kModelInit,
                    "precision fp16 is not supported on CPU (no fp16 autocast for CPU kernels): "
                    "use precision bf16 or fp32, or device cuda");
  }
}

AutocastScope::AutocastScope(Precision precision, const torch::Device& device)
    : device_type_(device.type()) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_,
                                   precision == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

torch::Tensor to_channels_last(const torch::Tensor& tensor) {
  if (tensor.dim() == 4) return tensor.contiguous(torch::MemoryFormat::ChannelsLast);
  if (tensor.dim() == 5) return tensor.contiguous(torch::MemoryFormat::ChannelsLast3d);
  return tensor;
}

void module_to_channels_last(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : module.parameters()) parameter.set_data(to_channels_last(parameter));
  for (auto& buffer : module.buffers()) buffer.set_data(to_channels_last(buffer));
}

void set_tf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

// The checksum's weight repeats every 13 elements, so the elements are summed in 13 columns
// (a [n/13, 13] view; the < 13 remaining ones alone) and each column sum is weighted once:
// one pass over the parameters in their own dtype, accumulated in double, instead of a
// double copy, an index tensor and an fmod per element (which made it the largest per-cell
// cost of tiny cells: docs/performance.md).
double parameter_checksum(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kPeriod = 13;
  double checksum = 0.0;
  int64_t index = 0;
  for (const auto& parameter : module.parameters()) {
    const auto flat = parameter.detach().flatten();
    const auto terms = at::add(flat.abs(), flat, 0.5);  // |w| + w/2
    const int64_t whole = flat.numel() / kPeriod * kPeriod;
    const auto columns =
        terms.narrow(0, 0, whole).view({-1, kPeriod}).sum(0, false, torch::kDouble);
    const auto rest = terms.narrow(0, whole, flat.numel() - whole).to(torch::kDouble);
    const auto column_sums = columns.cpu();
    const auto rest_values = rest.cpu();
    const double* sums = column_sums.data_ptr<double>();
    const double* tail = rest_values.data_ptr<double>();
    for (int64_t j = 0; j < kPeriod; ++j) {
      const double weight = 1.0 + static_cast<double>((j + index * 31) % kPeriod) / kPeriod;
      double column = sums[j];
      if (j < rest_values.numel()) column += tail[j];
      checksum += column * weight;
    }
    ++index;
  }
  return checksum;
}

}  // namespace scalebench
