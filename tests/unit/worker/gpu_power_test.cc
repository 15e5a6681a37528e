// Note [GPU energy]: without NVML (every CI machine) nothing is measured and nothing is made
// up; with a GPU, the worker reads the energy counter around the loop (tests/mpi GPU tests).
#include "worker/gpu_power.h"

#include <gtest/gtest.h>

namespace scalebench {
namespace {

TEST(GpuPower, AnUnknownGpuOrNoNvmlGivesNoReader) {
  // No GPU has PCI bus id ffff:ff:1f.7; without libnvidia-ml.so.1 nothing opens at all.
  EXPECT_EQ(GpuPower::open("0000FFFF:FF:1F.7"), nullptr);
}

TEST(GpuPower, NoReaderMeansNoMetricsNotZeros) {
  EXPECT_TRUE(loop_power_metrics(nullptr, 100.0, 2.0).empty());
}

}  // namespace
}  // namespace scalebench
