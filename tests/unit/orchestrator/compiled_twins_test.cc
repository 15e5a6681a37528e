// Note [Compiled twins]: rank 0's export step, with a stand-in for the worker library's
// state writer and a shell script in place of `python -m scalebench_client.export` (the
// real export runs in tests/analysis/test_compile_axis.py). Checks: which cells export, the
// command, the twin folder and its reuse, the key, and a failed export failing only its
// cells in phase prepare.
#include "orchestrator/compiled_twins.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

/// Records what the export step reports.
class RecordingSink : public ResultSink {
 public:
  void mark_running(const CellSpec&, const std::vector<int>&) override {}
  void mark_skipped(const CellSpec&, const std::string&) override {}
  void complete(const CellSpec&, const std::vector<RankResult>&) override {}
  void finish_without_results(const CellSpec& cell, CellStatus status, FailurePhase phase,
                              const std::string& reason) override {
    failed.push_back({cell.cell_id, status, phase, reason});
  }
  void progress(const CellSpec&, const CellProgress&) override {}
  struct Failed {
    std::string cell_id;
    CellStatus status;
    FailurePhase phase;
    std::string reason;
  };
  std::vector<Failed> failed;
};

class CompiledTwinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("scalebench_twins_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  /// A stand-in for python: appends its arguments to calls.txt and writes the file after
  /// --torchscript/--aoti and its sidecar, or fails with `exit_status`.
  fs::path fake_python(int exit_status) {
    const auto path = root_ / ("python-" + std::to_string(exit_status));
    std::ofstream(path) << "#!/bin/sh\n"
                           "echo \"$@\" >> '"
                        << (root_ / "calls.txt").string()
                        << "'\n"
                           "if [ "
                        << exit_status << " -ne 0 ]; then echo 'twin drifted' >&2; exit "
                        << exit_status
                        << "; fi\n"
                           "while [ $# -gt 0 ]; do\n"
                           "  case \"$1\" in --torchscript|--aoti) out=\"$2\";; esac; shift\n"
                           "done\n"
                           "echo model > \"$out\"; echo '{}' > \"$out.json\"\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  TwinExportContext context(int exit_status) {
    TwinExportContext context;
    context.work_dir = root_ / "work";
    context.python = fake_python(exit_status).string();
    context.torch_version = "2.15.0";
    context.write_zoo_state = [this](const CellSpec& cell, const std::string&,
                                     const std::string& path) {
      states.push_back(cell.cell_id);
      std::ofstream(path) << "state";
    };
    context.tree_of = [this](const CellSpec&) { return root_; };
    return context;
  }

  static CellSpec cell(const std::string& id, const std::string& compile, uint64_t seed = 0) {
    CellSpec cell;
    cell.experiment = "mlp";
    cell.model.zoo = "mlp";
    cell.mode = Mode::kInfer;
    cell.compile = compile;
    cell.seed = seed;
    cell.cell_id = id;
    return cell;
  }

  std::string calls() const {
    std::ifstream in(root_ / "calls.txt");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path root_;
  std::vector<std::string> states;
};

TEST_F(CompiledTwinsTest, EachTwinIsExportedOnceFromTheEagerStateAndReusedAfter) {
  RecordingSink sink;
  const std::vector<CellSpec> cells = {cell("e", "eager"), cell("t1", "torchscript"),
                                       cell("a", "aoti"), cell("t2", "torchscript")};
  auto outcome = export_compiled_twins(cells, context(0), sink);
  EXPECT_TRUE(sink.failed.empty());
  ASSERT_EQ(outcome.to_run.size(), 4U) << "eager cells pass through";
  EXPECT_EQ(outcome.twins.count("e"), 0U);
  EXPECT_EQ(outcome.twins.at("t1"), outcome.twins.at("t2")) << "one twin, two cells";
  EXPECT_EQ(outcome.twins.at("t1").filename(), "model.ts");
  EXPECT_EQ(outcome.twins.at("a").filename(), "model.pt2");
  EXPECT_EQ(outcome.twins.at("a").parent_path().parent_path(), root_ / "work" / "compiled");
  EXPECT_TRUE(fs::is_regular_file(outcome.twins.at("a")));
  EXPECT_EQ(states, (std::vector<std::string>{"t1"})) << "one model, seed: one state";
  // The command: the state, the zoo's defaults where the cell is silent, the device.
  EXPECT_THAT(calls(), HasSubstr("-m scalebench_client.export --zoo mlp --state " +
                                 (root_ / "work" / "compiled" / "states").string() + "/"));
  EXPECT_THAT(calls(), HasSubstr(".pt --input-shape 784 --num-classes 10 --aoti " +
                                 outcome.twins.at("a").string() + " --device cpu"));
  EXPECT_FALSE(fs::exists(root_ / "work" / "compiled" / "states")) << "the states are removed";

  states.clear();
  fs::remove(root_ / "calls.txt");
  outcome = export_compiled_twins(cells, context(0), sink);
  EXPECT_EQ(outcome.to_run.size(), 4U);
  EXPECT_EQ(states.size(), 1U) << "the weights are written again: their digest is the key's";
  EXPECT_FALSE(fs::exists(root_ / "calls.txt")) << "a twin whose sidecar exists is reused";
}

TEST_F(CompiledTwinsTest, OtherWeightsAreAnotherTwin) {
  RecordingSink sink;
  auto twins = context(0);
  const auto first = export_compiled_twins({cell("t", "torchscript")}, twins, sink);
  twins.write_zoo_state = [](const CellSpec&, const std::string&, const std::string& path) {
    std::ofstream(path) << "retrained";  // a new checkpoint under the same name
  };
  const auto second = export_compiled_twins({cell("t", "torchscript")}, twins, sink);
  EXPECT_NE(first.twins.at("t"), second.twins.at("t"));
  EXPECT_TRUE(sink.failed.empty());
}

TEST_F(CompiledTwinsTest, AFailedExportFailsOnlyItsCellsInPhasePrepare) {
  RecordingSink sink;
  auto outcome = export_compiled_twins({cell("e", "eager"), cell("t1", "torchscript"),
                                        cell("t2", "torchscript"), cell("other", "aoti", 5)},
                                       context(3), sink);
  ASSERT_EQ(outcome.to_run.size(), 1U);
  EXPECT_EQ(outcome.to_run[0].cell_id, "e");
  EXPECT_EQ(outcome.failed_cells, 3U);
  ASSERT_EQ(sink.failed.size(), 3U);
  for (const auto& failed : sink.failed) {
    EXPECT_EQ(failed.status, CellStatus::kFailed);
    EXPECT_EQ(failed.phase, FailurePhase::kPrepare);
    EXPECT_THAT(failed.reason, HasSubstr("could not be exported"));
    EXPECT_THAT(failed.reason, HasSubstr("twin drifted")) << "the log's tail";
  }
  EXPECT_EQ(states.size(), 2U) << "t1 and t2 share weights: one state, one attempt";
}

TEST_F(CompiledTwinsTest, WithoutAPythonTheCellsSayWhatToSet) {
  RecordingSink sink;
  auto twins = context(0);
  twins.python.clear();
  const auto outcome = export_compiled_twins({cell("t", "torchscript")}, twins, sink);
  EXPECT_TRUE(outcome.to_run.empty());
  ASSERT_EQ(sink.failed.size(), 1U);
  EXPECT_THAT(sink.failed[0].reason, HasSubstr("SCALEBENCH_PYTHON"));
}

TEST(TwinKey, ChangesWithWhatTheTwinIsMadeOf) {
  CellSpec cell;
  cell.model.zoo = "resnet18";
  cell.compile = "aoti";
  const auto key = twin_key(cell, "cpu", "d1", "2.15.0");
  EXPECT_EQ(key.size(), 16U);
  EXPECT_EQ(twin_key(cell, "cpu", "d1", "2.15.0"), key);
  EXPECT_NE(twin_key(cell, "cuda", "d1", "2.15.0"), key);
  EXPECT_NE(twin_key(cell, "cpu", "d2", "2.15.0"), key) << "other weights";
  EXPECT_NE(twin_key(cell, "cpu", "d1", "2.11.0"), key);
  CellSpec other = cell;
  other.model.zoo = "resnet50";
  EXPECT_NE(twin_key(other, "cpu", "d1", "2.15.0"), key);
  other = cell;
  other.num_classes = 10;
  EXPECT_NE(twin_key(other, "cpu", "d1", "2.15.0"), key);
  other = cell;
  other.compile = "torchscript";
  EXPECT_NE(twin_key(other, "cpu", "d1", "2.15.0"), key);
  other = cell;
  other.input_shape = {3, 224, 224};  // the default, written out: the same twin
  EXPECT_EQ(twin_key(other, "cpu", "d1", "2.15.0"), key);
  other.batch_size = 64;  // any batch runs on one twin (dynamic batch)
  EXPECT_EQ(twin_key(other, "cpu", "d1", "2.15.0"), key);
}

TEST(TwinDevice, TheCellsDeviceAndAutoFollowsTheWorkers) {
  CellSpec cell;
  cell.compile = "aoti";
  EXPECT_EQ(twin_device(cell, false), "cpu");
  EXPECT_EQ(twin_device(cell, true), "cuda");
  cell.device = Device::kCpu;
  EXPECT_EQ(twin_device(cell, true), "cpu");
  cell.device = Device::kCuda;
  EXPECT_EQ(twin_device(cell, false), "cuda");
  cell.compile = "torchscript";
  EXPECT_EQ(twin_device(cell, true), "cpu") << "a trace is exported once for every device";
}

}  // namespace
}  // namespace scalebench
