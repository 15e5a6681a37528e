/* Smallest check that Slurm starts Open MPI ranks through PMIx: every rank sends its rank
 * to rank 0, which prints one line and exits non-zero if the sum is wrong. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  int sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    ok = sum == size * (size - 1) / 2;
    printf("mpi_hello: %d ranks, rank sum %d (%s)\n", size, sum, ok ? "ok" : "WRONG");
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
