#include "results/provenance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "common/base/cpu_model.h"
#include "common/cell/cell_spec.h"

namespace scalebench {
namespace {

std::map<std::string, std::string> allowlisted(std::vector<std::string> entries) {
  std::vector<char*> envp;
  envp.reserve(entries.size() + 1);
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  return allowlisted_environment(envp.data());
}

TEST(AllowlistedEnvironment, KeepsOnlyListedNamesAndPrefixesAndDropsSecrets) {
  const std::map<std::string, std::string> expected = {
      {"NCCL_DEBUG", "INFO"},        {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"OMPI_COMM_WORLD_SIZE", "3"}, {"SLURM_JOB_ID", "42"},
      {"OMP_NUM_THREADS", "4"},      {"TORCH_CUDNN_V8_API_ENABLED", "1"},
      {"MKL_NUM_THREADS", "2"},      {"PMIX_RANK", "0"},
      {"HOSTNAME", "node1"},         {"SLURM_NTASKS", ""},
      {"OMPI_MCA_pml", "a=b"},       {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
  };
  EXPECT_EQ(expected, allowlisted({
                          "NCCL_DEBUG=INFO",
                          "CUDA_VISIBLE_DEVICES=0,1",
                          "OMPI_COMM_WORLD_SIZE=3",
                          "SLURM_JOB_ID=42",
                          "OMP_NUM_THREADS=4",
                          "TORCH_CUDNN_V8_API_ENABLED=1",
                          "MKL_NUM_THREADS=2",
                          "PMIX_RANK=0",
                          "HOSTNAME=node1",
                          "HOME=/root",
                          "AWS_SECRET_ACCESS_KEY=x",
                          "PATH=/usr/bin",
                          "SLURM_JWT=eyJhbGciOi",
                          "NCCL_IB_AUTH_TOKEN=t",
                          "HOSTNAMES=not-exact",
                          "nccl_debug=lowercase",
                          "NOEQUALS",
                          "=nameless",
                          "SLURM_NTASKS=",
                          "OMPI_MCA_pml=a=b",
                          "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
                      }));
  EXPECT_TRUE(allowlisted_environment(nullptr).empty());
}

// Issue 15, finding 4: each of these was stored under the old broad prefixes (TORCH_,
// CUDA_, SLURM_, PMIX_, OMPI_) because no deny marker matched it.
TEST(AllowlistedEnvironment, DropsSecretsUnderAllowedPrefixes) {
  EXPECT_EQ((std::map<std::string, std::string>{}),
            allowlisted({
                "TORCH_GITHUB_PAT=ghp_0123456789",
                "TORCH_HUB_PERSONAL_ACCESS=ghp_0123456789",
                "TORCH_DB_PASS=hunter2",
                "CUDA_MPS_PIPE_DIRECTORY=/tmp/mps",
                "SLURM_JOB_USER=alice",
                "SLURM_SUBMIT_DIR=/home/alice/secret-project",
                "PMIX_SERVER_URI2=pmix-server.1234;tcp4://127.0.0.1:40000",
                "PMIX_SERVER_URI21=pmix-server.1234;tcp4://127.0.0.1:40000",
                "PMIX_SERVER_URI4=pmix-server.1234;tcp4://127.0.0.1:40000",
                "PMIX_SECURITY_MODE=native",
                "OMPI_MCA_orte_precondition_transports=0123456789abcdef-fedcba9876543210",
                "OMPI_MCA_pmix_server_uri=tcp://127.0.0.1:1",
                "OMPI_MCA_x_private_file=/home/alice/.ssh/id_rsa",
                "OMPI_MCA_x_cert=/etc/ssl/x.pem",
                "OMPI_MCA_x_signature=abc",
                "OMPI_MCA_x_session_dir=/tmp/ompi.alice",
                "OMP_CREDS=x",
                "NCCL_SOMETHING_PASSWORD=x",
                "TORCH_NCCL_COOKIE=x",
                "NCCL_PROXY_URL=http://user:pw@proxy",
            }));
}

// The lists are part of what a results file may contain: changing them is a decision
// that changes this test and docs/results-file.md together.
TEST(AllowlistedEnvironment, ListsAreTheDocumentedOnes) {
  EXPECT_EQ((std::vector<std::string>{"NCCL_", "TORCH_NCCL_", "OMP_", "OMPI_MCA_"}),
            kEnvironmentPrefixes);
  EXPECT_EQ((std::vector<std::string>{
                "HOSTNAME",
                "CUDA_VISIBLE_DEVICES",
                "CUDA_DEVICE_ORDER",
                "CUDA_LAUNCH_BLOCKING",
                "CUDA_DEVICE_MAX_CONNECTIONS",
                "CUDA_MODULE_LOADING",
                "CUDA_CACHE_DISABLE",
                "PYTORCH_CUDA_ALLOC_CONF",
                "TORCH_DISTRIBUTED_DEBUG",
                "TORCH_CUDNN_V8_API_ENABLED",
                "TORCH_SHOW_CPP_STACKTRACES",
                "MKL_NUM_THREADS",
                "MKL_DYNAMIC",
                "MKL_CBWR",
                "MKL_ENABLE_INSTRUCTIONS",
                "MKL_THREADING_LAYER",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_NODE_RANK",
                "OMPI_UNIVERSE_SIZE",
                "PMIX_RANK",
                "SLURM_JOB_ID",
                "SLURM_JOB_NAME",
                "SLURM_JOB_PARTITION",
                "SLURM_JOB_NODELIST",
                "SLURM_JOB_NUM_NODES",
                "SLURM_NNODES",
                "SLURM_NTASKS",
                "SLURM_NTASKS_PER_NODE",
                "SLURM_CPUS_PER_TASK",
                "SLURM_CPUS_ON_NODE",
                "SLURM_GPUS",
                "SLURM_GPUS_PER_NODE",
                "SLURM_GPUS_PER_TASK",
                "SLURM_CLUSTER_NAME",
                "SLURM_ARRAY_JOB_ID",
                "SLURM_ARRAY_TASK_ID",
            }),
            kEnvironmentNames);
  EXPECT_EQ((std::vector<std::string>{"TOKEN", "SECRET", "PASS", "PAT", "JWT", "KEY", "CRED",
                                      "AUTH", "PRIVATE", "CERT", "SIGN", "SESSION", "COOKIE",
                                      "TRANSPORT", "URI", "URL", "PRECONDITION"}),
            kEnvironmentDenyMarkers);
  for (const std::string& name : kEnvironmentNames) {
    EXPECT_EQ(1U, allowlisted({name + "=v"}).size()) << name << " is listed but a marker drops it";
  }
}

// Note [Stored program environment]: paths under path-like names are stored, anything else
// only where the allowlist admits the name.
TEST(ProgramEnvValueStored, PathsUnderPathNamesAndAllowlistedNamesOnly) {
  struct Case {
    const char* name;
    const char* value;
    bool stored;
  };
  const std::vector<Case> cases{
      {"PYTHONPATH", ".", true},
      {"PYTHONPATH", "../../../program/client", true},
      {"PYTHONPATH", ".:/opt/lib/python3.11/site-packages", true},
      {"PYTHONPATH", "./src:{output_dir}/extra", true},
      {"PROJECT_ROOT", "{output_dir}", true},
      {"HF_HOME", "~/.cache/huggingface", true},
      {"DATA_DIR", "$HOME/data", true},
      {"LD_LIBRARY_PATH", "/usr/local/cuda/lib64:", true},
      {"OMP_NUM_THREADS", "4", true},  // allowlisted name: any value
      {"PYTHONPATH", "src", false},    // a bare word: could be a token
      {"PYTHONPATH", "", false},
      {"DATA_DIR", "s3://bucket/data", false},  // a URL may carry credentials
      {"DATA_DIR", "https://user:pw@host/x", false},
      {"PROJECT_ROOT", "/a b", false},  // a character a path here does not have
      {"PROJECT_ROOT", "/data?token=abc", false},
      {"SSH_KEY_PATH", "/home/u/.ssh/id_rsa", false},  // a secret marker before the suffix
      {"HF_TOKEN", "hf_abcdef", false},
      {"WANDB_API_KEY", "/looks/like/a/path", false},
      {"MY_SETTING", "/a/path", false},  // not a path name
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.stored, program_env_value_stored(c.name, c.value)) << c.name << "=" << c.value;
  }
  EXPECT_EQ((std::vector<std::string>{"PATH", "_ROOT", "_HOME", "_DIR"}), kPathVariableSuffixes);
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

TEST(Iso8601, UtcMillisecondsWithZ) {
  EXPECT_TRUE(std::regex_match(iso8601_utc_now(),
                               std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)")));
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
  EXPECT_EQ(2, p.cell_count);
  EXPECT_FALSE(p.start_time.empty());
  EXPECT_TRUE(p.torch_version.empty());  // the caller's job
  EXPECT_EQ(allowlisted_environment(environ), p.environment);
}

TEST(CpuModel, FirstModelNameOfX86AndTheArmKeysOtherwise) {
  EXPECT_EQ("AMD EPYC 7B13",
            cpu_model_from_cpuinfo("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                                   "model name\t: AMD EPYC 7B13 \r\nprocessor\t: 1\n"
                                   "model name\t: Other\n"));
  // Arm kernels have no `model name` line; Graviton reports the core in `uarch`-like keys.
  EXPECT_EQ("NVIDIA Grace", cpu_model_from_cpuinfo("processor : 0\nBogoMIPS : 2000.00\n"
                                                   "Hardware : NVIDIA Grace\n"));
  EXPECT_EQ("", cpu_model_from_cpuinfo("processor : 0\nmodel name :   \n"));
  EXPECT_EQ("", cpu_model_from_cpuinfo(""));
}

TEST(CpuModel, ThisMachineHasOne) {
  // Every Linux CI machine's /proc/cpuinfo names its CPU one way or the other.
  EXPECT_FALSE(cpu_model_name().empty());
}

}  // namespace
}  // namespace scalebench
