#include "worker/cpu_threads.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace scalebench {
namespace {

TEST(CpuThreads, CoresAreSharedAmongLocalWorkers) {
  struct Case {
    int cores, workers, expected;
  };
  for (const Case c :
       {Case{16, 4, 4}, Case{16, 3, 5}, Case{2, 4, 1}, Case{8, 0, 8}, Case{0, 1, 1}}) {
    EXPECT_EQ(threads_per_worker(c.cores, c.workers), c.expected) << c.cores << "/" << c.workers;
  }
}

TEST(CpuThreads, ConfigureSetsTorchsPool) {
  EXPECT_EQ(configure_cpu_threads(4, 2), 2);
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(configure_cpu_threads(4, 4), 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_EQ(configure_cpu_threads(4, 4, 3), 3) << "cpu_threads given: the allocation is ignored";
  EXPECT_EQ(at::get_num_threads(), 3);
}

}  // namespace
}  // namespace scalebench
