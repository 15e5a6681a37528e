// The `profile` subgroup of a cell (Note [Operator profiles]; schemas/results-layout.md): stored
// as the ranks sent it, gone on a retry without it, and a cell without profile keeps its id.
#include "results/profile_table.h"

#include <gtest/gtest.h>

#include "common/hdf5/check.h"
#include "common/hdf5/wrappers.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

OpProfile profile_of(int rank) {
  return OpProfile{.steps = 3,
                   .activities = {"cpu"},
                   .ops = {{.name = "aten::addmm",
                            .phase = "forward",
                            .device = "cpu",
                            .count = 6,
                            .self_s = 0.5 + rank,
                            .total_s = 0.75 + rank,
                            .self_cpu_memory_bytes = 4096},
                           {.name = "aten::mm",
                            .phase = "backward",
                            .device = "cpu",
                            .count = 12,
                            .self_s = 0.25,
                            .total_s = 0.25,
                            .self_cpu_memory_bytes = 0}}};
}

TEST(ProfileTable, StoredPerRankAndDroppedOnARetryWithout) {
  testing_util::TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance("0123456789abcdef"), false);
  CellSpec cell = testing_util::train_cell(1, 2, 1, 5);
  cell.profile_steps = 3;
  cell = finalize_cell_id(cell);
  auto ranks = testing_util::full_results(cell);
  for (auto& rank : ranks) rank.profile = profile_of(rank.group_rank);
  store.mark_running(cell, {1, 2});
  store.complete_cell(cell, ranks);
  {
    const auto file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    const auto group = own_group(
        HDF5_CHECK(H5Gopen2(file, ("cells/" + cell.cell_id + "/profile").c_str(), H5P_DEFAULT)));
    EXPECT_EQ(h5::read_int64_attribute(group, "steps"), 3);
    EXPECT_EQ(h5::read_string_attribute(group, "activities"), R"(["cpu"])");
    EXPECT_EQ(h5::dataset_dims(group, "ops"), (std::vector<hsize_t>{4, 5}));
    const auto ops = h5::read_double_dataset(group, "ops");
    EXPECT_EQ(ops, (std::vector<double>{0, 6, 0.5, 0.75, 4096, 0, 12, 0.25, 0.25, 0,  //
                                        1, 6, 1.5, 1.75, 4096, 1, 12, 0.25, 0.25, 0}));
    EXPECT_EQ(h5::read_string_dataset(group, "names"),
              (std::vector<std::string>{"aten::addmm", "aten::mm", "aten::addmm", "aten::mm"}));
    EXPECT_EQ(h5::read_string_dataset(group, "phases"),
              (std::vector<std::string>{"forward", "backward", "forward", "backward"}));
    EXPECT_EQ(h5::read_string_dataset(group, "devices"), std::vector<std::string>(4, "cpu"));
  }
  store.mark_running(cell, {1, 2});  // a retry whose ranks did not profile keeps no old table
  store.complete_cell(cell, testing_util::full_results(cell));
  const auto file = own_file(HDF5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const auto group =
      own_group(HDF5_CHECK(H5Gopen2(file, ("cells/" + cell.cell_id).c_str(), H5P_DEFAULT)));
  EXPECT_TRUE(h5::has_link(group, "timings"));
  EXPECT_FALSE(h5::has_link(group, "profile"));
}

TEST(ProfileTable, TheSettingEntersTheIdOnlyWhenSet) {
  const CellSpec plain = finalize_cell_id(testing_util::train_cell(1));
  CellSpec profiled = plain;
  profiled.profile_steps = 5;
  profiled = finalize_cell_id(profiled);
  EXPECT_NE(plain.cell_id, profiled.cell_id);
  EXPECT_FALSE(to_json(plain).contains("profile_steps"));
  EXPECT_EQ(to_json(profiled).at("profile_steps"), 5);
  CellSpec zero = plain;
  zero.profile_steps = 0;
  EXPECT_EQ(finalize_cell_id(zero).cell_id, plain.cell_id);
}

}  // namespace
}  // namespace scalebench
