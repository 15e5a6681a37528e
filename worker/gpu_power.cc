#include "worker/gpu_power.h"

#include <dlfcn.h>

#include <utility>

namespace scalebench {

// The NVML C ABI subset of Note [GPU energy] (types as in nvml.h: nvmlReturn_t is an enum
// with NVML_SUCCESS = 0, nvmlDevice_t an opaque pointer, nvmlClockType_t an enum with
// NVML_CLOCK_SM = 1 and NVML_CLOCK_MEM = 2).
struct GpuPower::Api {
  using Init = int (*)();
  using HandleByPciBusId = int (*)(const char*, void**);
  using TotalEnergy = int (*)(void*, unsigned long long*);
  using ClockInfo = int (*)(void*, int, unsigned int*);
  using PowerLimit = int (*)(void*, unsigned int*);
  static constexpr int kSuccess = 0;
  static constexpr int kClockSm = 1;
  static constexpr int kClockMemory = 2;

  void* library = nullptr;
  HandleByPciBusId handle_by_pci_bus_id = nullptr;
  TotalEnergy total_energy = nullptr;
  ClockInfo clock = nullptr;
  ClockInfo max_clock = nullptr;
  PowerLimit power_limit = nullptr;

  /// Loaded and initialised once per process, or nullptr. Never closed: NVML's own
  /// shutdown at exit is not needed, and a dlclose would dangle the function pointers.
  static std::shared_ptr<const Api> load() {
    static const std::shared_ptr<const Api> loaded = [] {
      std::shared_ptr<Api> api = std::make_shared<Api>();
      api->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (api->library == nullptr) return std::shared_ptr<Api>();
      const auto init = symbol<Init>(api->library, "nvmlInit_v2");
      api->handle_by_pci_bus_id =
          symbol<HandleByPciBusId>(api->library, "nvmlDeviceGetHandleByPciBusId_v2");
      api->total_energy = symbol<TotalEnergy>(api->library, "nvmlDeviceGetTotalEnergyConsumption");
      api->clock = symbol<ClockInfo>(api->library, "nvmlDeviceGetClockInfo");
      api->max_clock = symbol<ClockInfo>(api->library, "nvmlDeviceGetMaxClockInfo");
      api->power_limit = symbol<PowerLimit>(api->library, "nvmlDeviceGetPowerManagementLimit");
      if (init == nullptr || api->handle_by_pci_bus_id == nullptr || init() != kSuccess) {
        return std::shared_ptr<Api>();
      }
      return api;
    }();
    return loaded;
  }

  template <typename Function>
  static Function symbol(void* library, const char* name) {
    // dlsym returns functions as void*: the POSIX-sanctioned cast.
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    return reinterpret_cast<Function>(dlsym(library, name));
  }
};

GpuPower::GpuPower(std::shared_ptr<const Api> api, void* device)
    : api_(std::move(api)), device_(device) {}

GpuPower::~GpuPower() = default;

std::unique_ptr<GpuPower> GpuPower::open(const std::string& pci_bus_id) {
  auto api = Api::load();
  if (!api) return nullptr;
  void* device = nullptr;
  if (api->handle_by_pci_bus_id(pci_bus_id.c_str(), &device) != Api::kSuccess) return nullptr;
  return std::unique_ptr<GpuPower>(new GpuPower(std::move(api), device));
}

std::optional<double> GpuPower::total_energy_j() const {
  unsigned long long millijoules = 0;
  if (api_->total_energy == nullptr || api_->total_energy(device_, &millijoules) != Api::kSuccess) {
    return std::nullopt;
  }
  return static_cast<double>(millijoules) / 1000.0;
}

std::map<std::string, double> GpuPower::clock_metrics() const {
  std::map<std::string, double> metrics;
  unsigned int value = 0;
  if (api_->clock != nullptr && api_->clock(device_, Api::kClockSm, &value) == Api::kSuccess) {
    metrics["gpu_sm_clock_mhz"] = value;
  }
  if (api_->clock != nullptr && api_->clock(device_, Api::kClockMemory, &value) == Api::kSuccess) {
    metrics["gpu_memory_clock_mhz"] = value;
  }
  if (api_->max_clock != nullptr &&
      api_->max_clock(device_, Api::kClockSm, &value) == Api::kSuccess) {
    metrics["gpu_max_sm_clock_mhz"] = value;
  }
  if (api_->power_limit != nullptr && api_->power_limit(device_, &value) == Api::kSuccess) {
    metrics["gpu_power_limit_w"] = value / 1000.0;  // NVML reports milliwatts
  }
  return metrics;
}

std::map<std::string, double> loop_power_metrics(const GpuPower* power,
                                                 std::optional<double> start_j,
                                                 double loop_wall_s) {
  if (power == nullptr) return {};
  std::map<std::string, double> metrics = power->clock_metrics();
  const auto end_j = power->total_energy_j();
  if (start_j && end_j && *end_j >= *start_j) {
    metrics["gpu_energy_j"] = *end_j - *start_j;
    if (loop_wall_s > 0) metrics["gpu_power_w"] = (*end_j - *start_j) / loop_wall_s;
  }
  return metrics;
}

}  // namespace scalebench
