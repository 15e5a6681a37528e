// A reader of torch.save files that executes nothing: the zip records through LibTorch's
// PyTorchStreamReader and a small pickle interpreter of the archive's data.pkl.
// See Note [Reading torch.save files without Python].
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "common/base/error.h"

namespace caffe2::serialize {
class PyTorchStreamReader;
}

namespace scalebench::torch_save {

/// A file that is not a torch.save zip, is damaged, or pickles something this reader does
/// not interpret. The message says what and where (opcode byte and offset, record name);
/// the caller adds the path and what to do.
class TorchSaveError : public Error {
 public:
  using Error::Error;
};

class Value;
using List = std::vector<Value>;
struct Dict;

/// Python bytes / bytearray.
struct Bytes {
  std::string data;
};

/// Any Python global other than the few this reader interprets (omegaconf.DictConfig, a
/// user's class, pathlib.PosixPath, numpy scalars, ...): the class itself, or
/// (`instance`) what REDUCE / NEWOBJ made of it. Never constructed, never executed.
struct Opaque {
  std::string module;
  std::string name;
  bool instance = false;
};

/// A storage of the file (record `data/<key>`): `numel` elements of `dtype`.
struct Storage {
  std::string key;
  c10::ScalarType dtype = c10::ScalarType::Byte;
  int64_t numel = 0;
};

/// A tensor of the file, not yet read: a strided view of a storage, checked to lie inside
/// it. TorchSaveFile::read makes it a tensor, so that entries nobody uses (a Lightning
/// checkpoint's optimizer_states) cost no memory.
struct TensorRef {
  Storage storage;
  int64_t offset = 0;  // elements
  std::vector<int64_t> size;
  std::vector<int64_t> stride;  // elements
};

/// A list (a Python set or frozenset too). Shared: the pickle memo refers to it.
struct ListRef {
  std::shared_ptr<List> items;
};
/// A tuple. Shared like ListRef.
struct TupleRef {
  std::shared_ptr<List> items;
};

/// The unpickled value. Lists and dicts are shared (copying a Value copies a reference),
/// as the memo of a pickle requires. Freeing one never recurses: a crafted pickle can nest
/// lists a million deep (through the memo, in a few megabytes), and a recursive destructor
/// would overflow the stack; the last owner of a container moves its items to a work list
/// instead (Note [Freeing deep values] in torch_save_reader.cc).
class Value {
 public:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::string, Bytes, TensorRef,
                            ListRef, TupleRef, std::shared_ptr<Dict>, Opaque, Storage>;
  Value() = default;
  template <typename T, typename = std::enable_if_t<!std::is_same_v<std::decay_t<T>, Value>>>
  Value(T data) : data_(std::move(data)) {}  // NOLINT(google-explicit-constructor)
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  /// By copy and swap: the value replaced is freed by a temporary's (iterative) destructor.
  Value& operator=(const Value& other);
  Value& operator=(Value&& other) noexcept;
  ~Value();

  template <typename T>
  [[nodiscard]] bool is() const {
    return std::holds_alternative<T>(data_);
  }
  template <typename T>
  [[nodiscard]] const T& as() const {
    return std::get<T>(data_);
  }
  [[nodiscard]] bool is_none() const { return is<std::monostate>(); }
  /// The dict this value is, or null.
  [[nodiscard]] std::shared_ptr<Dict> dict() const;
  /// "dict", "tensor", "omegaconf.dictconfig.DictConfig", ...: for messages.
  [[nodiscard]] std::string describe() const;

 private:
  /// Moves the items of the container this value holds into `pending` when this value is
  /// the container's last owner (nobody else can see them any more).
  void release_items(std::vector<Value>& pending);

  Data data_;
};

/// A dict (also collections.OrderedDict), in insertion order. Keys that are neither
/// strings nor ints (a tuple, None, a float) are not kept: they are counted.
struct Dict {
  using Key = std::variant<std::string, int64_t>;
  std::vector<std::pair<Key, Value>> items;
  size_t other_keys = 0;

  /// The value of the string key `key`, or null.
  [[nodiscard]] const Value* find(const std::string& key) const;
};

/// One torch.save file (zip format, PyTorch >= 1.6; also torch::pickle_save's output).
/// Not thread-safe. Reading it runs no code from the file.
class TorchSaveFile {
 public:
  /// Opens `path` and interprets its data.pkl; throws TorchSaveError when the file cannot
  /// be opened, is not a zip file, is truncated, is big-endian, or pickles an opcode or a
  /// storage type this reader does not know.
  explicit TorchSaveFile(const std::string& path);
  ~TorchSaveFile();
  TorchSaveFile(const TorchSaveFile&) = delete;
  TorchSaveFile& operator=(const TorchSaveFile&) = delete;

  /// The object torch.save was given.
  [[nodiscard]] const Value& root() const { return root_; }

  /// The tensor `ref` describes, read from the file: a CPU tensor of the saved dtype,
  /// contiguous, that owns its memory (values bit-exact). Throws TorchSaveError when the
  /// storage record is shorter than the storage.
  torch::Tensor read(const TensorRef& ref);

 private:
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
  Value root_;
};

/// Interprets `pickle` (protocols 2 to 5) without executing anything; BINPERSID storages
/// are checked with `storage_bytes(key)` (the size of record data/<key>, or -1 when absent).
/// Exposed for tests. See Note [Reading torch.save files without Python].
Value unpickle(const std::string& pickle,
               const std::function<int64_t(const std::string&)>& storage_bytes);

}  // namespace scalebench::torch_save
