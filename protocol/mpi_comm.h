// RAII MPI handles and typed point-to-point messaging.
//
// Thread safety: MPI is initialised with MPI_THREAD_MULTIPLE when available (the
// worker's NCCL watchdog and the orchestrator's signal handling use threads), but each
// communicator is used by one thread at a time.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "protocol/mpi_check.h"
#include "protocol/wire.h"

namespace scalebench {

/// MPI_Init_thread in the constructor, MPI_Finalize in the destructor. One per process.
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  /// Thread level MPI granted (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
  [[nodiscard]] int thread_level() const { return thread_level_; }

 private:
  int thread_level_ = 0;
};

/// Owns an MPI communicator (MPI_Comm_free on destruction). MPI_COMM_NULL is "empty".
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] MPI_Comm get() const { return comm_; }
  [[nodiscard]] bool empty() const { return comm_ == MPI_COMM_NULL; }
  [[nodiscard]] int rank() const;
  [[nodiscard]] int size() const;

 private:
  void reset();
  MPI_Comm comm_ = MPI_COMM_NULL;
};

int world_rank();
int world_size();

/// A communicator of exactly `members` (MPI_COMM_WORLD ranks, in group-rank order),
/// made with MPI_Comm_create_group: only the members call it. `tag` must be the same on
/// all members and differ between groups created concurrently.
Communicator create_group_communicator(const std::vector<int>& members, int tag);

/// Ranks sharing this node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) of `comm`.
Communicator split_shared_node(MPI_Comm comm);

struct ReceivedMessage {
  int source = -1;
  Tag tag = Tag::kShutdown;
  std::vector<uint8_t> bytes;
};

/// Blocking send of one payload (MPI_BYTE) with a typed tag.
void send_message(const std::vector<uint8_t>& bytes, int destination, Tag tag, MPI_Comm comm);
/// Blocking receive: MPI_Probe + MPI_Get_count + MPI_Recv. `source` may be MPI_ANY_SOURCE.
ReceivedMessage receive_message(int source, Tag tag, MPI_Comm comm);
/// Non-blocking: the message if one from `source` with any of `tags` is waiting, else nullopt.
std::optional<ReceivedMessage> try_receive_message(int source, const std::vector<Tag>& tags,
                                                   MPI_Comm comm);

}  // namespace scalebench
