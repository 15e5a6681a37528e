// Benchmark (tests/perf/run.sh), never a test: what recording a cell costs, at 1, 1,000 and
// 10,000 cells already in the file.
//
//   update      one ResultsStore update (mark_running or complete_cell, each its own copy
//               + rename: Note [Results durability]); grows with the file
//   dispatch    what the dispatch loop pays per cell through GroupCommitSink (queue the two
//               records): Note [Group commit]
//   writer      the writer thread's commit time per cell over a burst of cells
//
// Each cell: 2 ranks x (1 warm-up + 5 measured) iterations x 7 phases, as a tiny cell of
// tests/perf/orchestration.py. The file is filled to each size with one batch (one update),
// then measured. Prints TABLE| lines for run.sh.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "../unit/common/results_store_test_util.h"
#include "orchestrator/group_commit_sink.h"

namespace scalebench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kHash = "perfperfperf0000";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

CellSpec cell_of(uint64_t seed) { return testing_util::train_cell(seed, 2, 1, 5); }

void fill(ResultsStore& store, uint64_t first, uint64_t count) {
  store.batch([&] {
    for (uint64_t seed = first; seed < first + count; ++seed) {
      const CellSpec cell = cell_of(seed);
      store.mark_running(cell, {1, 2});
      store.complete_cell(cell, testing_util::full_results(cell));
    }
  });
}

struct Figures {
  double update_us = 0;    ///< one synchronous update
  double dispatch_us = 0;  ///< per cell, the loop's side of the group commit
  double writer_us = 0;    ///< per cell, the writer's commit time
  size_t commits = 0;
  size_t cells = 0;
  double file_mib = 0;
};

Figures measure(const std::filesystem::path& path, uint64_t existing, int burst) {
  Figures f;
  std::filesystem::remove(path);
  ResultsStore store =
      ResultsStore::create(path, testing_util::test_provenance(kHash), /*force=*/true);
  fill(store, 0, existing);
  f.file_mib = static_cast<double>(std::filesystem::file_size(path)) / (1 << 20);
  constexpr int kUpdates = 10;
  const auto start = Clock::now();
  for (int i = 0; i < kUpdates; ++i) {
    const CellSpec cell = cell_of(existing + i);
    if (i % 2 == 0) {
      store.mark_running(cell, {1, 2});
    } else {
      store.complete_cell(cell, testing_util::full_results(cell));
    }
  }
  f.update_us = 1e6 * seconds_since(start) / kUpdates;

  // A burst of cells through the group commit, as the dispatch loop records them. The rank
  // results are built before the clock starts: they arrive over MPI in a run.
  std::vector<std::vector<RankResult>> results;
  std::vector<CellSpec> cells;
  for (int i = 0; i < burst; ++i) {
    cells.push_back(cell_of(existing + kUpdates + i));
    results.push_back(testing_util::full_results(cells.back()));
  }
  GroupCommitSink sink(store);
  const auto loop_start = Clock::now();
  for (int i = 0; i < burst; ++i) {
    sink.mark_running(cells[i], {1, 2});
    sink.complete(cells[i], results[i]);
  }
  f.dispatch_us = 1e6 * seconds_since(loop_start) / burst;
  sink.close();
  const GroupCommitStats stats = sink.stats();
  f.writer_us = 1e6 * stats.commit_s / burst;
  f.commits = stats.commits;
  f.cells = store.cells().size();
  return f;
}

}  // namespace
}  // namespace scalebench

int main() {
  using scalebench::measure;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("scalebench-store-cost-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "r.h5";
  constexpr int kBurst = 500;
  std::printf("%8s %9s %12s %14s %12s %8s\n", "cells", "file MiB", "update (us)", "dispatch (us)",
              "writer (us)", "commits");
  for (const uint64_t existing : {1ULL, 1000ULL, 10000ULL}) {
    const auto f = measure(path, existing, kBurst);
    std::printf("%8llu %9.1f %12.0f %14.1f %12.0f %8zu\n",
                static_cast<unsigned long long>(existing), f.file_mib, f.update_us, f.dispatch_us,
                f.writer_us, f.commits);
    std::printf("TABLE|results_store|one update at %llu cells (%.1f MiB)|-|%.0f us|-\n",
                static_cast<unsigned long long>(existing), f.file_mib, f.update_us);
    std::printf("TABLE|results_store|dispatch loop per cell at %llu cells|<= 50 us|%.1f us|%s\n",
                static_cast<unsigned long long>(existing), f.dispatch_us,
                f.dispatch_us <= 50 ? "yes" : "no");
    std::printf(
        "TABLE|results_store|writer per cell at %llu cells (%zu commits / %d)|-|%.0f us|-\n",
        static_cast<unsigned long long>(existing), f.commits, kBurst, f.writer_us);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
