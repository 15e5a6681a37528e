#include "common/provenance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "common/cell_spec.h"

namespace scalebench {
namespace {

TEST(AllowlistedEnvironment, KeepsOnlyListedPrefixesAndDropsSecrets) {
  std::vector<std::string> entries = {
      "NCCL_DEBUG=INFO",
      "CUDA_VISIBLE_DEVICES=0,1",
      "OMPI_COMM_WORLD_SIZE=3",
      "SLURM_JOB_ID=42",
      "OMP_NUM_THREADS=4",
      "TORCH_CUDNN_V8_API=1",
      "MKL_NUM_THREADS=2",
      "PMIX_RANK=0",
      "HOSTNAME=node1",
      "HOME=/root",
      "AWS_SECRET_ACCESS_KEY=x",
      "PATH=/usr/bin",
      "SLURM_JWT=eyJhbGciOi",
      "NCCL_IB_AUTH_TOKEN=t",
      "CUDA_API_KEY=k",
      "HOSTNAMES=not-exact",
      "nccl_debug=lowercase",
      "NOEQUALS",
      "SLURM_EMPTY=",
      "OMPI_MCA_x=a=b",
  };
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::map<std::string, std::string> expected = {
      {"NCCL_DEBUG", "INFO"},        {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"OMPI_COMM_WORLD_SIZE", "3"}, {"SLURM_JOB_ID", "42"},
      {"OMP_NUM_THREADS", "4"},      {"TORCH_CUDNN_V8_API", "1"},
      {"MKL_NUM_THREADS", "2"},      {"PMIX_RANK", "0"},
      {"HOSTNAME", "node1"},         {"SLURM_EMPTY", ""},
      {"OMPI_MCA_x", "a=b"},
  };
  EXPECT_EQ(expected, allowlisted_environment(envp.data()));
  EXPECT_TRUE(allowlisted_environment(nullptr).empty());
}

TEST(MatrixHash, OrderIndependentSixteenHexDigitsOfSortedIds) {
  const std::vector<std::string> ids = {"b2", "a1", "c3"};
  const std::string hash = matrix_hash(ids);
  EXPECT_TRUE(std::regex_match(hash, std::regex("[0-9a-f]{16}"))) << hash;
  EXPECT_EQ(hash, matrix_hash({"c3", "a1", "b2"}));
  EXPECT_NE(hash, matrix_hash({"a1", "b2"}));
  char expected[17];
  std::snprintf(expected, sizeof(expected), "%016llx",
                static_cast<unsigned long long>(fnv1a64("a1\nb2\nc3")));
  EXPECT_EQ(expected, hash);
  EXPECT_EQ("cbf29ce484222325", matrix_hash({}));  // FNV-1a-64 offset basis: empty input
}

TEST(Iso8601, UtcSecondsWithZ) {
  EXPECT_TRUE(
      std::regex_match(iso8601_utc_now(), std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)")));
}

TEST(CollectProvenance, FillsToolLibrariesAndInputs) {
  const Provenance p =
      collect_provenance({"scalebench", "run", "m.yaml"}, "m.yaml", "cells: []\n", {"x", "y"}, 3);
  EXPECT_EQ("0.1.0", p.tool_version);
  EXPECT_TRUE(std::regex_match(p.hdf5_version, std::regex(R"(\d+\.\d+\.\d+)"))) << p.hdf5_version;
  EXPECT_FALSE(p.mpi_version.empty());
  EXPECT_EQ(std::string::npos, p.mpi_version.find('\n'));
  EXPECT_EQ(3, p.mpi_size);
  EXPECT_EQ((std::vector<std::string>{"scalebench", "run", "m.yaml"}), p.argv);
  EXPECT_EQ("m.yaml", p.matrix_path);
  EXPECT_EQ("cells: []\n", p.matrix_text);
  EXPECT_EQ(matrix_hash({"y", "x"}), p.matrix_hash);
  EXPECT_FALSE(p.start_time.empty());
  EXPECT_TRUE(p.torch_version.empty());  // the caller's job
  EXPECT_EQ(allowlisted_environment(environ), p.environment);
}

}  // namespace
}  // namespace scalebench
