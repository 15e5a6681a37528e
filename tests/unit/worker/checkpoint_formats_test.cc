// Checkpoints users have, read without Python: files written by the venv's torch
// (tests/unit/worker/make_checkpoints.py, run once per test binary with SCALEBENCH_PYTHON)
// are read by torch_save::TorchSaveFile and load_state_dict and compared bit-exactly with
// the raw bytes the script wrote; damaged files fail with one message naming the file and
// what to do. Hand-made pickles check the interpreter's bounds and opcode errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/build_info.h"
#include "common/base/error.h"
#include "common/cell/cell_spec.h"
#include "worker/checkpoint.h"
#include "worker/model_zoo.h"
#include "worker/torch_save_reader.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using torch_save::TensorRef;
using torch_save::TorchSaveFile;
using torch_save::Value;
using namespace std::string_literals;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The fixtures of make_checkpoints.py, written once into a temporary folder named by the
/// script's text and the Python: ctest runs every test of this suite as a process of its own,
/// and each used to run the script again (about 10 s of importing torch each); the first
/// process writes the folder (under a temporary name, renamed when complete) and the others
/// read it. The tests only read the files.
class CheckpointFormats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (*build_info::kPython == '\0') return;
    const fs::path script = build_info::source_dir() / "tests/unit/worker/make_checkpoints.py";
    const std::string key = std::to_string(fnv1a64(read_text(script) + build_info::kPython));
    folder_ = new fs::path(fs::path(::testing::TempDir()) / ("scalebench_checkpoints_" + key));
    std::error_code error;
    if (fs::is_regular_file(*folder_ / "expected.json", error)) {
      made_ = true;
      return;
    }
    const fs::path partial = folder_->string() + ".partial" + std::to_string(::getpid());
    const std::string command = std::string("'") + build_info::kPython + "' '" + script.string() +
                                "' '" + partial.string() + "'";
    made_ = std::system(command.c_str()) == 0;
    fs::rename(partial, *folder_, error);  // another process's complete copy may be there
    fs::remove_all(partial, error);
    made_ = made_ && fs::is_regular_file(*folder_ / "expected.json", error);
  }
  static void TearDownTestSuite() {
    delete folder_;
    folder_ = nullptr;
  }
  void SetUp() override {
    if (*build_info::kPython == '\0') GTEST_SKIP() << "no SCALEBENCH_PYTHON";
    ASSERT_TRUE(made_) << "make_checkpoints.py failed";
  }

  static std::string file(const std::string& name) { return (*folder_ / name).string(); }

  /// Expects `actual` to hold the bytes and shape make_checkpoints.py recorded for
  /// `fixture`/`entry`.
  static void expect_bit_exact(const std::string& fixture, const std::string& entry,
                               const torch::Tensor& actual) {
    const auto expected = nlohmann::json::parse(read_text(*folder_ / "expected.json"));
    const auto& info = expected.at(fixture).at(entry);
    EXPECT_EQ(std::vector<int64_t>(actual.sizes().begin(), actual.sizes().end()),
              info.at("shape").get<std::vector<int64_t>>())
        << fixture << " " << entry;
    const std::string raw = read_text(*folder_ / "expected" / fixture / (entry + ".bin"));
    const torch::Tensor bytes = actual.contiguous().view({-1}).view(torch::kUInt8);
    ASSERT_EQ(static_cast<size_t>(bytes.numel()), raw.size()) << fixture << " " << entry;
    EXPECT_EQ(std::memcmp(bytes.data_ptr(), raw.data(), raw.size()), 0) << fixture << " " << entry;
  }

  static void expect_state(const std::string& fixture, const models::NamedState& state) {
    for (const auto& [name, tensor] : state) expect_bit_exact(fixture, name, tensor);
  }

  static fs::path* folder_;
  static bool made_;
};

fs::path* CheckpointFormats::folder_ = nullptr;
bool CheckpointFormats::made_ = false;

template <typename Body>
std::string checkpoint_error(Body&& body) {
  try {
    body();
  } catch (const CellError& error) {
    EXPECT_EQ(to_string(error.phase()), "checkpoint_load") << error.what();
    return error.what();
  }
  ADD_FAILURE() << "expected CellError(checkpoint_load)";
  return "";
}

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

TEST_F(CheckpointFormats, DtypesAndStridedViewsReadBitExactly) {
  TorchSaveFile saved(file("dtypes.pt"));
  const auto dict = saved.root().dict();
  ASSERT_TRUE(dict);
  const std::map<std::string, c10::ScalarType> dtypes = {
      {"half", torch::kHalf},    {"bfloat16", torch::kBFloat16}, {"transposed", torch::kFloat},
      {"sliced", torch::kFloat}, {"double", torch::kDouble},     {"int8", torch::kInt8},
      {"int32", torch::kInt32},  {"uint8", torch::kUInt8},       {"int16", torch::kInt16},
      {"bool", torch::kBool},    {"scalar", torch::kFloat},      {"empty", torch::kFloat},
      {"weight", torch::kFloat}};
  EXPECT_EQ(dict->items.size(), dtypes.size());
  for (const auto& [name, dtype] : dtypes) {
    const Value* value = dict->find(name);
    ASSERT_TRUE(value && value->is<TensorRef>()) << name;
    const torch::Tensor tensor = saved.read(value->as<TensorRef>());
    EXPECT_EQ(tensor.scalar_type(), dtype) << name;
    EXPECT_TRUE(tensor.is_contiguous()) << name;
    expect_bit_exact("dtypes", name, tensor);
  }
  // The transposed view and the slice are views of one storage, at an offset.
  EXPECT_EQ(dict->find("sliced")->as<TensorRef>().offset, 7);
  EXPECT_EQ(dict->find("transposed")->as<TensorRef>().stride, (std::vector<int64_t>{1, 5}));
}

TEST_F(CheckpointFormats, PlainStateDictOfTheZooMlpLoads) {
  const auto model = models::build_mlp({3}, 2);
  load_state_dict(models::named_state(*model), file("plain.pt"));
  expect_state("plain", models::named_state(*model));
}

TEST_F(CheckpointFormats, DictOfTheStateDictLoadsWithIntegerBuffers) {
  torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4));
  load_state_dict(models::named_state(*model), file("dict.pt"));
  expect_state("dict", models::named_state(*model));
  EXPECT_EQ(model->named_buffers()["1.num_batches_tracked"].item<int64_t>(), 1);
}

TEST_F(CheckpointFormats, LightningCheckpointLoadsWithItsPrefixRemoved) {
  const auto model = models::build_mlp({3}, 2);
  load_state_dict(models::named_state(*model), file("lightning.ckpt"));
  expect_state("lightning", models::named_state(*model));
}

TEST_F(CheckpointFormats, LightningHyperParametersAreOpaqueNeverConstructed) {
  TorchSaveFile saved(file("lightning.ckpt"));
  const auto root = saved.root().dict();
  ASSERT_TRUE(root);
  EXPECT_EQ(root->find("epoch")->as<int64_t>(), 3);
  EXPECT_EQ(root->find("pytorch-lightning_version")->as<std::string>(), "2.4.0");
  const auto hyper = root->find("hyper_parameters")->dict();
  ASSERT_TRUE(hyper);
  const auto& config = hyper->find("config")->as<torch_save::Opaque>();
  EXPECT_EQ(config.module, "__main__");
  EXPECT_EQ(config.name, "UserConfig");
  EXPECT_TRUE(config.instance);
  EXPECT_TRUE(hyper->find("schedule")->is<torch_save::Opaque>());
  EXPECT_TRUE(hyper->find("counts")->is<torch_save::Opaque>());          // defaultdict
  EXPECT_TRUE(hyper->find("root")->is<torch_save::Opaque>());            // PurePosixPath
  EXPECT_EQ(hyper->find("huge")->as<torch_save::Opaque>().name, "int");  // 2**70
  EXPECT_EQ(hyper->find("negative")->as<int64_t>(), -(int64_t{1} << 40));
  EXPECT_EQ(hyper->find("raw")->describe(), "_codecs.encode");           // protocol 2 bytes
  EXPECT_EQ(hyper->find("tags")->as<torch_save::Opaque>().name, "set");  // protocol 2: set(list)
  const auto ordered = hyper->find("ordered")->dict();
  ASSERT_TRUE(ordered);
  EXPECT_EQ(ordered->find("a")->as<int64_t>(), 1);
  EXPECT_EQ(hyper->other_keys, 1U);  // the tuple key
  // Optimizer state: dicts with integer keys, tensors never read.
  const auto& optimizers = *root->find("optimizer_states")->as<torch_save::ListRef>().items;
  ASSERT_EQ(optimizers.size(), 1U);
  const auto state = optimizers[0].dict()->find("state")->dict();
  ASSERT_TRUE(state);
  EXPECT_TRUE(std::holds_alternative<int64_t>(state->items.at(0).first));
}

TEST_F(CheckpointFormats, MixedPrefixesAreNotGuessed) {
  const auto model = models::build_mlp({3}, 2);
  const std::string message = checkpoint_error(
      [&] { load_state_dict(models::named_state(*model), file("lightning_mixed.ckpt")); });
  EXPECT_HAS(message, file("lightning_mixed.ckpt"));
  EXPECT_HAS(message, "has no entry fc1.weight");
  EXPECT_HAS(message, "Lightning checkpoint with 7 entries under state_dict");
}

TEST_F(CheckpointFormats, ShapeMismatchAfterThePrefixNamesTheEntry) {
  const auto model = models::build_mlp({4}, 2);
  const std::string message = checkpoint_error(
      [&] { load_state_dict(models::named_state(*model), file("lightning.ckpt")); });
  EXPECT_HAS(message, "entry model.fc1.weight has shape [512, 3], the model needs [512, 4]");
  EXPECT_HAS(message, "prefix model. removed");
}

TEST_F(CheckpointFormats, UnreadableFilesSayWhatToDo) {
  const auto model = models::build_mlp({3}, 2);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not_zip.pt", "not a readable torch.save zip file"},
      {"truncated.pt", "not a readable torch.save zip file"},
      {"legacy.pt", "not a readable torch.save zip file"},
      {"no_tensors.pt", "holds a dict without tensors"},
      {"absent.pt", "cannot open"},
  };
  for (const auto& [name, needle] : cases) {
    const std::string message =
        checkpoint_error([&] { load_state_dict(models::named_state(*model), file(name)); });
    EXPECT_HAS(message, file(name));
    EXPECT_HAS(message, needle);
    EXPECT_HAS(message, "torch.save(model.state_dict(), path)");
  }
}

/// A pickle of _rebuild_tensor_v2(storage of `numel` floats, offset 0, (size,), (1,)).
std::string tensor_pickle(int numel, int size) {
  std::string p = "\x80\x02";
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(\x8c\x07storage";
  p += "ctorch\nFloatStorage\n";
  p += "\x8c\x01"
       "0";
  p += "\x8c\x03"
       "cpu";
  p += "K";
  p += static_cast<char>(numel);
  p += "tQ";
  p += std::string("K\0", 2);
  p += "K";
  p += static_cast<char>(size);
  p += "\x85K\x01\x85\x89NtR.";
  return p;
}

TEST(Unpickle, TensorsAreCheckedAgainstTheirStorage) {
  struct Case {
    int numel, size;
    int64_t record_bytes;
    const char* error;  // empty: reads
  };
  const std::vector<Case> cases = {
      {4, 4, 16, ""},
      {4, 5, 16, "reads past its storage 0 of 4 elements"},
      {4, 4, 8, "storage 0 of 4 elements has 8 bytes"},
      {4, 4, -1, "has no record"},
  };
  for (const auto& c : cases) {
    const auto bytes = [&](const std::string&) { return c.record_bytes; };
    if (*c.error == '\0') {
      const Value value = torch_save::unpickle(tensor_pickle(c.numel, c.size), bytes);
      ASSERT_TRUE(value.is<TensorRef>());
      EXPECT_EQ(value.as<TensorRef>().size, (std::vector<int64_t>{c.size}));
      continue;
    }
    try {
      torch_save::unpickle(tensor_pickle(c.numel, c.size), bytes);
      ADD_FAILURE() << "expected " << c.error;
    } catch (const torch_save::TorchSaveError& error) {
      EXPECT_HAS(error.what(), c.error);
    }
  }
}

TEST(Unpickle, UnknownOpcodesAndTruncationNameTheOffset) {
  const auto no_storage = [](const std::string&) { return int64_t{-1}; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\x80\x02\xff"s, "offset 2: opcode 0xff"},
      {"\x80\x02i"s, "opcode 0x69 ('i')"},
      {"\x80\x02X\x10\x00\x00\x00"s + "ab", "offset 2: a length of 16 past the end"},
      {"\x80\x02]"s, "offset 3: truncated"},
      {"\x80\x02h\x05."s, "memo entry 5 was never stored"},
      {"\x80\x02\x8c\x01xcos\nsystem\n\x8c\x01xR."s, "REDUCE with arguments that are not a tuple"},
  };
  for (const auto& [pickle, needle] : cases) {
    try {
      torch_save::unpickle(pickle, no_storage);
      ADD_FAILURE() << "expected " << needle;
    } catch (const torch_save::TorchSaveError& error) {
      EXPECT_HAS(error.what(), needle);
    }
  }
  // A global is never imported: os.system(...) is an opaque instance.
  const Value value = torch_save::unpickle("\x80\x02\x63os\nsystem\n\x8c\x02ls\x85R.", no_storage);
  EXPECT_EQ(value.describe(), "os.system");
}

/// Lists nested a million deep through the memo (Note [Freeing deep values]): read, walked
/// and freed without overflowing the stack, in constant stack depth.
TEST(Unpickle, ListsNestedAMillionDeepAreFreedWithoutRecursion) {
  constexpr int kDepth = 1'000'000;
  std::string pickle = "\x80\x02]q\x00"s;  // the outer list, memo 0 = the innermost list
  pickle.reserve(pickle.size() + 6 * kDepth + 1);
  for (int i = 0; i < kDepth; ++i) pickle += "h\x00]q\x00\x61\x30"s;  // GET, [], PUT, APPEND, POP
  pickle += ".";
  const auto no_storage = [](const std::string&) { return int64_t{-1}; };
  {
    const Value outer = torch_save::unpickle(pickle, no_storage);
    const Value* level = &outer;
    int depth = 0;
    while (level->is<torch_save::ListRef>() && !level->as<torch_save::ListRef>().items->empty()) {
      level = &level->as<torch_save::ListRef>().items->front();
      ++depth;
    }
    EXPECT_EQ(depth, kDepth);
  }  // freed here: a recursive destructor would crash the test
  // Shared inner values survive their first owner: a copy keeps the nested list intact.
  Value copy;
  {
    const Value outer =
        torch_save::unpickle("\x80\x02]q\x00h\x00]q\x01\x61\x30h\x01\x8c\x01xa0."s, no_storage);
    copy = outer;
  }
  ASSERT_TRUE(copy.is<torch_save::ListRef>());
  const auto& inner = copy.as<torch_save::ListRef>().items->front();
  ASSERT_TRUE(inner.is<torch_save::ListRef>());
  EXPECT_EQ(inner.as<torch_save::ListRef>().items->front().describe(), "str");
}

}  // namespace
}  // namespace scalebench
