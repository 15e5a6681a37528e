// Typed messages cross real MPI ranks intact: rank 0 sends an Assignment to every other
// rank, which echoes back a RankResult built from it.
#include <gtest/gtest.h>

#include "protocol/mpi_comm.h"
#include "protocol/wire.h"

namespace scalebench {
namespace {

TEST(MessagesOverMpi, AssignmentAndResultRoundTrip) {
  const int rank = world_rank();
  const int size = world_size();
  ASSERT_GE(size, 2);
  CellSpec cell;
  cell.experiment = "mlp-train";
  cell.model.zoo = "mlp";
  cell.batch_size = 16;
  cell.world_size = size - 1;
  cell = finalize_cell_id(cell);
  if (rank == 0) {
    Assignment assignment{cell, {1, 2}, std::string("\x00\x01\xff", 3), "/work/tree"};
    for (int peer = 1; peer < size; ++peer)
      send_message(serialize(assignment), peer, Tag::kAssign, MPI_COMM_WORLD);
    for (int peer = 1; peer < size; ++peer) {
      const auto message = receive_message(MPI_ANY_SOURCE, Tag::kResult, MPI_COMM_WORLD);
      const auto result = deserialize_result(message.bytes);
      EXPECT_EQ(result.cell_id, cell.cell_id);
      EXPECT_EQ(result.world_rank, message.source);
      ASSERT_EQ(result.timings_s.size(), 6u);
      EXPECT_DOUBLE_EQ(result.timings_s[5], 0.5 * message.source);
    }
  } else {
    const auto message = receive_message(0, Tag::kAssign, MPI_COMM_WORLD);
    const auto assignment = deserialize_assignment(message.bytes);
    EXPECT_EQ(assignment.cell, cell);
    EXPECT_EQ(assignment.artifact.size(), 3u);
    RankResult result;
    result.cell_id = assignment.cell.cell_id;
    result.world_rank = rank;
    result.phases = {"a", "b", "c"};
    result.timings_s = {0, 1, 2, 3, 4, 0.5 * rank};
    send_message(serialize(result), 0, Tag::kResult, MPI_COMM_WORLD);
  }
}

}  // namespace
}  // namespace scalebench
