// The wire contract between the orchestrator (rank 0) and the workers: the MPI tags, the
// largest message, and the MessagePack encoding of the messages of common/cell/messages.h.
// Every message is one MPI_BYTE payload sent with a typed tag; receivers MPI_Probe +
// MPI_Get_count for the size (protocol/mpi_comm.h).
//
// Note [Orchestrator protocol]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// All messages travel on MPI_COMM_WORLD with the typed tags below; the payloads
// are MessagePack (size probed by the receiver).
//
//   1. Every rank calls discover_worker_context() (collective: node split).
//   2. Each worker sends one Tag::kHello (WorkerHello: host, local index, device) to
//      rank 0, which waits for all of them before it schedules anything (groups prefer
//      one node, see Note [Scheduling]).
//   3. Rank 0 broadcasts a go/no-go int (0 = go, else the exit status every rank
//      returns: bad input is found before any cell runs).
//   4. For each dispatched cell rank 0 first marks it `running` in the results file
//      (flushed), then sends Tag::kAssign (Assignment: spec + members) to every member.
//   5. The members, and only they, call MPI_Comm_create_group with tag
//      group_creation_tag(members) = 1000 + first member: groups alive at the same time
//      are disjoint, so their tags differ, and the tags never collide with the message
//      tags (100..105). The group communicator is handed to CellRunner::run.
//   6. Each member sends its RankResult (Tag::kResult) to rank 0. When all members of a
//      cell have reported, rank 0 writes the cell (complete, flushed) and frees the group.
//   7. At the end rank 0 sends Tag::kShutdown (empty) to every worker, then every rank
//      takes part in one MPI_Bcast of the exit status, so mpirun's status is rank 0's.
//
// Rank 0 never blocks on a receive: its loop polls for results (MPI_Iprobe), the stop
// signal flag (Note [Stop signals]) and the per-cell watchdog (Note [Late cells]).
//
// Rank 0's side is orchestrator/orchestrator.cc, a worker's protocol/worker_loop.cc and
// protocol/worker_rank.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/cell/messages.h"

namespace scalebench {

/// MPI tags of scalebench messages on MPI_COMM_WORLD.
enum class Tag : int {
  kAssign = 100,    ///< rank 0 -> worker: Assignment
  kResult = 101,    ///< worker -> rank 0: RankResult
  kShutdown = 102,  ///< rank 0 -> worker: empty payload, leave the worker loop
  kHello = 103,     ///< worker -> rank 0: WorkerHello, once at start
  kProgress = 104,  ///< group rank 0 of a cell -> rank 0: CellProgress, at a bounded rate
  /// group rank -> the other ranks of its group: its program failed, end yours (Note
  /// [Program cells], program/program_cell.cc); empty payload, on the group communicator
  kProgramStop = 105,
};

std::vector<uint8_t> serialize(const WorkerHello& hello);
std::vector<uint8_t> serialize(const Assignment& assignment);
std::vector<uint8_t> serialize(const RankResult& result);
std::vector<uint8_t> serialize(const CellProgress& progress);
/// Largest serialized message (one MPI_Send of MPI_BYTE counts in int); larger TorchScript
/// artifacts are refused by rank 0 with CellError(FailurePhase::kInputs).
inline constexpr size_t kMaxMessageBytes = 2147483647 - 4096;

/// Throw InputError on malformed bytes (a version skew between ranks, a truncated message).
WorkerHello deserialize_hello(const std::vector<uint8_t>& bytes);
Assignment deserialize_assignment(const std::vector<uint8_t>& bytes);
RankResult deserialize_result(const std::vector<uint8_t>& bytes);
CellProgress deserialize_progress(const std::vector<uint8_t>& bytes);

}  // namespace scalebench
