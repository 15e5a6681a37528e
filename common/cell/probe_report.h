// The report of `scalebench probe` (docs/probe.md): the rows the workers measured, as rank 0
// prints them and results/probe_file.h stores them. Plain data, with its JSON text (the workers
// send it to rank 0) and the bus-bandwidth factor. The measurement is protocol/collective_probe.h.
//
// Note [Probe figures]
// ~~~~~~~~~~~~~~~~~~~~
// Every worker rank takes part; rank 0 only collects. For each operation and size the
// workers run `warmup` untimed calls, meet in a barrier, then time `iterations` calls
// back to back (with a device synchronisation at the end); a rank's time per call is the
// elapsed time / iterations and the row's `time_s` is the slowest rank's. As in
// nccl-tests, `bytes` is the buffer of allreduce and broadcast and the gathered output of
// allgather; algbw = bytes / time_s; busbw = algbw x 2(n-1)/n (allreduce), x (n-1)/n
// (allgather), x 1 (broadcast): the bandwidth each link sustained, comparable across
// world sizes. After timing, every rank fills its buffer with values whose correct result
// is known exactly in float32 ((rank + 1) * (i mod 7 + 1)), runs the operation once more
// and checks every element: `max_error` is the largest difference on any rank, `ok` is
// max_error == 0. On the MPI backend the same sizes are also timed with a plain
// MPI_Allreduce loop on raw buffers (`baseline_time_s`), the cost of the backend's own
// machinery being the ratio.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scalebench {

struct ProbeRow {
  std::string operation;  ///< allreduce, broadcast, allgather
  bool in_place = true;   ///< allreduce: in place or into a second buffer
  int64_t bytes = 0;      ///< see Note [Probe figures]
  int64_t elements = 0;   ///< float32 elements per rank's input
  double time_s = 0;      ///< per call, slowest rank
  double algbw_gb_s = 0;  ///< bytes / time_s / 1e9
  double busbw_gb_s = 0;
  double max_error = 0;  ///< largest deviation from the exact result on any rank
  bool ok = false;
  double baseline_time_s = -1;  ///< plain MPI_Allreduce loop, per call; < 0 when not measured
};

struct ProbeReport {
  std::string backend;               ///< mpi or nccl
  std::string device;                ///< of group rank 0: "cpu" or the GPU's name
  std::vector<std::string> hosts;    ///< per group rank
  std::vector<std::string> devices;  ///< per group rank
  int world_size = 0;
  int iterations = 0;
  int warmup = 0;
  std::vector<ProbeRow> rows;
};

/// The bus bandwidth factor of `operation` over `world_size` ranks (Note [Probe figures]).
double busbw_factor(const std::string& operation, int world_size);

/// JSON text of a report (rank 0 receives it from the workers), and back.
std::string to_json_text(const ProbeReport& report);
ProbeReport probe_report_from_json_text(const std::string& text);

}  // namespace scalebench
