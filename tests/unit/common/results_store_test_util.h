// Shared fixtures of the results store tests: temporary directories, deterministic cells
// and rank results.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "results/provenance.h"

namespace scalebench::testing_util {

/// A fresh directory under the gtest temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "sb-store-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::vector<std::string>& train_phases() {
  static const std::vector<std::string> phases = {"data",      "h2d",       "forward", "backward",
                                                  "comm_wait", "optimizer", "step"};
  return phases;
}

/// A training cell with a distinct id per `seed`.
inline CellSpec train_cell(uint64_t seed, int world_size = 2, int warmup = 10, int measured = 100) {
  CellSpec cell;
  cell.branch = "main";
  cell.commit = "0123456789abcdef0123456789abcdef01234567";
  cell.experiment = "mlp-train";
  cell.model.zoo = "mlp";
  cell.mode = Mode::kTrain;
  cell.batch_size = 16;
  cell.world_size = world_size;
  cell.device = Device::kCpu;
  cell.backend = Backend::kMpi;
  cell.warmup_iterations = warmup;
  cell.measured_iterations = measured;
  cell.seed = seed;
  cell.source = "matrix.yaml:3";
  return finalize_cell_id(cell);
}

/// Deterministic timing of (seed, rank, iteration, phase), seconds.
inline double fake_time_s(uint64_t seed, int rank, size_t iteration, size_t phase) {
  return 0.001 * static_cast<double>(1 + phase) +
         1e-6 * static_cast<double>((seed * 7919 + rank * 104729 + iteration * 31 + phase) % 97);
}

/// A rank's results for `cell` with `iterations` rows of the 7 training phases.
inline RankResult rank_result(const CellSpec& cell, int group_rank, size_t iterations) {
  RankResult r;
  r.cell_id = cell.cell_id;
  r.group_rank = group_rank;
  r.world_rank = group_rank + 1;
  r.host = "host" + std::to_string(group_rank / 2);
  r.device = "cpu";
  r.phases = train_phases();
  r.warmup_iterations = cell.warmup_iterations;
  for (size_t i = 0; i < iterations; ++i) {
    for (size_t p = 0; p < r.phases.size(); ++p) {
      r.timings_s.push_back(fake_time_s(cell.seed, group_rank, i, p));
    }
  }
  r.metrics = {{"final_loss", 0.25 + group_rank},
               {"param_checksum", 42.5},
               {"peak_rss_bytes", 1e6 * (1 + group_rank)}};
  return r;
}

/// `world_size` ranks with warmup + measured rows each.
inline std::vector<RankResult> full_results(const CellSpec& cell) {
  std::vector<RankResult> ranks;
  for (int g = 0; g < cell.world_size; ++g) {
    ranks.push_back(rank_result(
        cell, g, static_cast<size_t>(cell.warmup_iterations + cell.measured_iterations)));
  }
  return ranks;
}

inline Provenance test_provenance(const std::string& hash) {
  Provenance p = collect_provenance({"scalebench", "run", "matrix.yaml", "-o", "r.h5"},
                                    "matrix.yaml", "experiments: {}\n", {}, 3);
  p.matrix_hash = hash;
  p.hosts = {"host0"};
  p.devices = R"([{"rank":1,"host":"host0","device":"cpu"}])";
  p.start_time = "2024-01-02T03:04:05Z";
  return p;
}

}  // namespace scalebench::testing_util
