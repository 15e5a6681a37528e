// main() for GoogleTests run under mpiexec.
//
// Contract: every rank runs every test; only rank 0 prints (other ranks' listeners are
// removed); a test that fails on any rank fails on all (the failure count is reduced
// with MPI_Allreduce), so the exit status of every rank, and so of mpiexec, agrees.
#include <gtest/gtest.h>
#include <mpi.h>

#include "protocol/mpi_check.h"

namespace {

/// Turns a failure on any rank into a failure on rank 0 after each test.
class AnyRankFailureListener : public testing::EmptyTestEventListener {
  void OnTestEnd(const testing::TestInfo& info) override {
    int failed_here = info.result()->Failed() ? 1 : 0;
    int failed_anywhere = 0;
    MPI_Allreduce(&failed_here, &failed_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (failed_anywhere != 0 && failed_here == 0) {
      ADD_FAILURE() << "test failed on another rank (rank " << rank << " passed)";
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  scalebench::install_mpi_error_returns();
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto& listeners = testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new AnyRankFailureListener);
  const int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
