// Table-driven tests of compute_bucket_assignment_by_size.
#include "common/cell/bucket_assignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "common/base/error.h"

namespace scalebench {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

struct Case {
  std::string name;
  std::vector<int64_t> bytes;
  int64_t first_cap;
  int64_t cap;
  std::vector<int64_t> keys;
  Buckets expected;
};

class BucketAssignment : public testing::TestWithParam<Case> {};

TEST_P(BucketAssignment, MatchesTable) {
  const Case& c = GetParam();
  EXPECT_EQ(compute_bucket_assignment_by_size(c.bytes, c.first_cap, c.cap, c.keys), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, BucketAssignment,
    testing::Values(
        Case{"empty", {}, 10, 10, {}, {}}, Case{"single", {4}, 10, 10, {}, {{0}}},
        Case{"all_fit_one_bucket", {1, 2, 3}, 10, 10, {}, {{0, 1, 2}}},
        // Reverse order: the last tensors form bucket 0, capped at the first cap.
        Case{"reverse_order_first_cap", {4, 4, 4, 4}, 4, 8, {}, {{3}, {1, 2}, {0}}},
        Case{"exact_fit_closes_on_next", {5, 5, 5}, 5, 10, {}, {{2}, {0, 1}}},
        // Strict cap: 6 + 5 > 10 so tensor 1 opens a new bucket.
        Case{"strict_cap", {5, 6, 6}, 10, 10, {}, {{2}, {1}, {0}}},
        Case{"oversized_alone", {1, 100, 1, 1}, 3, 3, {}, {{2, 3}, {1}, {0}}},
        Case{"oversized_first", {1, 1, 100}, 3, 3, {}, {{2}, {0, 1}}},
        Case{"zero_bytes_join_open_bucket", {0, 3, 0, 3}, 3, 3, {}, {{2, 3}, {0, 1}}},
        Case{"first_cap_larger_than_rest", {2, 2, 2, 2, 2}, 6, 2, {}, {{2, 3, 4}, {1}, {0}}},
        // Keys: each key has its own buckets and its own first cap; buckets ordered
        // by smallest index, descending.
        Case{"keys_split", {4, 4, 4, 4}, 8, 8, {0, 1, 0, 1}, {{1, 3}, {0, 2}}},
        Case{
            "keys_caps", {2, 2, 2, 2, 2, 2}, 2, 4, {0, 0, 0, 1, 1, 1}, {{5}, {3, 4}, {2}, {0, 1}}}),
    [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(BucketAssignmentProperties, EveryIndexExactlyOnceAndCapsHold) {
  std::vector<int64_t> bytes(97);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<int64_t>((i * 37) % 23);
  const int64_t first_cap = 20;
  const int64_t cap = 45;
  const Buckets buckets = compute_bucket_assignment_by_size(bytes, first_cap, cap);
  std::vector<int> seen(bytes.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b) {
    ASSERT_FALSE(buckets[b].empty());
    int64_t total = 0;
    for (const size_t i : buckets[b]) {
      ++seen[i];
      total += bytes[i];
    }
    if (buckets[b].size() > 1) {
      EXPECT_LE(total, b == 0 ? first_cap : cap) << "bucket " << b;
    }
    EXPECT_TRUE(std::is_sorted(buckets[b].begin(), buckets[b].end()));
    if (b > 0) {
      EXPECT_LT(buckets[b].back(), buckets[b - 1].front());
    }
  }
  for (const int count : seen) EXPECT_EQ(count, 1);
}

TEST(BucketAssignmentErrors, RejectsBadArguments) {
  EXPECT_THROW(compute_bucket_assignment_by_size({1}, 0, 10), InputError);
  EXPECT_THROW(compute_bucket_assignment_by_size({1}, 10, -1), InputError);
  EXPECT_THROW(compute_bucket_assignment_by_size({-1}, 10, 10), InputError);
  EXPECT_THROW(compute_bucket_assignment_by_size({1, 2}, 10, 10, {0}), InputError);
}

}  // namespace
}  // namespace scalebench
