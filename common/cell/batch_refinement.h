// Batch size `auto`: the recommended batch refined inside the safety margin. Pure (no MPI,
// no Torch); the worker probes the batch it names (worker/batch_probe.cc).
//
// Note [Batch refinement]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The search of Note [Batch search] (common/cell/batch_search.h) probes powers of two and
// then bisects the out-of-memory boundary, so the batches it measures inside the margin
// (peak memory <= (1 - safety_margin) x budget) are mostly powers of two, and the
// recommended batch was one of them: 128 where about 170 fits within the margin. After the
// search the worker draws peak memory = intercept + bytes_per_sample x batch through the two
// probes that fit and bracket the margin's edge (the largest within it, the smallest above
// it): memory is linear in the batch near the edge but not at the smallest batches, whose
// peaks hold the start-up's one-time buffers, so a least-squares line through every probe
// put the edge one batch too far on a ResNet (13 where 12 fits). Without a fitting probe above
// the edge the least-squares line through the probes that fit extrapolates. It takes the
// largest batch the line puts within the margin (at most the largest batch that fit), and
// when that batch was not probed and is above the
// recommended one, probes it once more like any other. The choice then runs on every probe,
// the new one included: it is recommended when its measured peak is within the margin and
// its throughput the highest there (a line that mispredicted costs one probe, never a batch
// outside the margin). Every rank computes the same batch from the same reduced probes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/cell/batch_search.h"

namespace scalebench {

/// Peak memory against batch, least squares over the probes that fit.
struct MemoryLine {
  double intercept_bytes = 0;
  double bytes_per_sample = 0;
};

/// The line through the ok probes; nullopt with fewer than two distinct batches.
std::optional<MemoryLine> memory_line(const std::vector<BatchProbe>& probes);

/// Note [Batch refinement]: the line through the two ok probes that bracket `cap_bytes` (the
/// largest batch with a peak <= cap, the smallest above it), or memory_line when no ok probe
/// lies on one side of it.
std::optional<MemoryLine> margin_line(const std::vector<BatchProbe>& probes, double cap_bytes);

/// The batch to probe after the search (Note [Batch refinement]); nullopt when there is no
/// budget, no rising line, or the batch is not above the recommended one or was probed.
std::optional<int64_t> refined_batch(const std::vector<BatchProbe>& probes,
                                     const BatchChoiceSettings& settings);

}  // namespace scalebench
