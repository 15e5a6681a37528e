#include "common/cell/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/base/error.h"

namespace scalebench {
namespace {

void validate(const std::vector<int64_t>& tensor_bytes, int64_t first_bucket_bytes,
              int64_t bucket_bytes, const std::vector<int64_t>& tensor_keys) {
  if (first_bucket_bytes <= 0 || bucket_bytes <= 0) {
    throw InputError("gradient bucket caps must be positive: first_bucket_bytes=" +
                     std::to_string(first_bucket_bytes) + ", bucket_bytes=" +
                     std::to_string(bucket_bytes) + "; set a bucket size above 0 bytes");
  }
  if (!tensor_keys.empty() && tensor_keys.size() != tensor_bytes.size()) {
    throw InputError("bucket assignment: " + std::to_string(tensor_keys.size()) +
                     " tensor keys for " + std::to_string(tensor_bytes.size()) + " tensors");
  }
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    if (tensor_bytes[i] < 0) {
      throw InputError("bucket assignment: tensor " + std::to_string(i) + " has negative size " +
                       std::to_string(tensor_bytes[i]) + " bytes");
    }
  }
}

/// The bucket being filled for one key, and how many buckets that key has closed.
struct OpenBucket {
  std::vector<size_t> indices;
  int64_t bytes = 0;
  size_t closed = 0;
};

}  // namespace

std::vector<std::vector<size_t>> compute_bucket_assignment_by_size(
    const std::vector<int64_t>& tensor_bytes, int64_t first_bucket_bytes, int64_t bucket_bytes,
    const std::vector<int64_t>& tensor_keys) {
  validate(tensor_bytes, first_bucket_bytes, bucket_bytes, tensor_keys);
  std::vector<std::vector<size_t>> buckets;
  std::map<int64_t, OpenBucket> open;
  const auto close = [&buckets](OpenBucket& bucket) {
    std::sort(bucket.indices.begin(), bucket.indices.end());
    buckets.push_back(std::move(bucket.indices));
    bucket.indices.clear();
    bucket.bytes = 0;
    ++bucket.closed;
  };
  for (size_t i = tensor_bytes.size(); i-- > 0;) {
    OpenBucket& bucket = open[tensor_keys.empty() ? 0 : tensor_keys[i]];
    const int64_t cap = bucket.closed == 0 ? first_bucket_bytes : bucket_bytes;
    if (!bucket.indices.empty() && bucket.bytes + tensor_bytes[i] > cap) close(bucket);
    bucket.indices.push_back(i);
    bucket.bytes += tensor_bytes[i];
  }
  for (auto& [key, bucket] : open) {
    if (!bucket.indices.empty()) close(bucket);
  }
  // Ready order: a bucket is complete when its smallest index (the last of its tensors
  // to get a gradient) is reached, so order by that index, largest first.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return buckets;
}

}  // namespace scalebench
