// Gradient bucket assignment for data-parallel training: a pure function, no Torch.
//
// See Note [Gradient buckets] in worker/gradient_reducer.cc for how the reducer uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace scalebench {

/// Groups tensors (given in model, i.e. parameter, order) into buckets for allreduce.
///
/// Contract:
///  * Tensors are visited in REVERSE order (the last parameters' gradients are ready
///    first in backward), so bucket 0 holds the last tensors.
///  * The first bucket of each key is capped at `first_bucket_bytes`, every later one at
///    `bucket_bytes`. The cap is strict: a tensor that would push a non-empty bucket past
///    its cap starts a new bucket. A tensor larger than the cap gets a bucket of its own.
///    (c10d instead closes a bucket after the tensor that reaches the cap, so its buckets
///    may overshoot by one tensor; ours never do.)
///  * `tensor_keys` (optional; empty = all tensors share one key) keeps tensors of
///    different keys (e.g. dtype x device) in different buckets, each key with its own
///    cap sequence, because one bucket is one flat buffer of one dtype on one device.
///  * Within a bucket, indices are ascending (model order). Buckets are ordered by their
///    smallest index, descending: the order in which they become ready in backward.
///  * Every tensor is in exactly one bucket; no bucket is empty; zero-byte tensors join
///    the open bucket of their key.
/// Throws InputError when a size or cap is negative, a cap is zero, or `tensor_keys` is
/// neither empty nor as long as `tensor_bytes`.
std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(
    const std::vector<int64_t>& tensor_bytes, int64_t first_bucket_bytes, int64_t bucket_bytes,
    const std::vector<int64_t>& tensor_keys = {});

}  // namespace scalebench
