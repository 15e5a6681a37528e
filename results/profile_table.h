// The `profile` subgroup of a cell (Note [Operator profiles] in common/cell/op_profile.h;
// schemas/results-layout.md).
#pragma once

#include <hdf5.h>

#include <vector>

#include "common/cell/messages.h"

namespace scalebench::results {

/// Name of the cell's subgroup.
inline constexpr const char* kProfileGroup = "profile";
/// Columns of its `ops` dataset, in order.
inline constexpr const char* kProfileColumns[] = {"rank", "count", "self_s", "total_s",
                                                  "self_cpu_memory_bytes"};

/// Writes `/cells/<id>/profile` from the ranks that profiled (RankResult::profile): attributes
/// `steps` (int64, the most steps a rank profiled) and `activities` (JSON list), datasets `ops`
/// (rows x 5 float64, attribute `columns`), `names`, `phases` and `devices` (one string per
/// row), each rank's rows in its order (self time descending). Nothing when no rank profiled;
/// the datasets are absent when every table is empty.
void write_profile(hid_t cell_group, const std::vector<RankResult>& ranks);

}  // namespace scalebench::results
