#include "worker/torch_save_reader.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>

namespace scalebench::torch_save {

std::shared_ptr<Dict> Value::dict() const {
  return is<std::shared_ptr<Dict>>() ? as<std::shared_ptr<Dict>>() : nullptr;
}

// Note [Freeing deep values]
// A Value owns its list, tuple or dict through a shared_ptr, so the default destructor frees
// a nested value by recursion: one stack frame set per level. Pickles nest through the memo
// without growing the unpickler's stack (GET the innermost list, EMPTY_LIST, PUT, APPEND,
// POP: 6 bytes a level), so a file of a few megabytes nests a million deep and a recursive
// free would overflow the stack. ~Value therefore never recurses: the last owner of a
// container moves its items into a work list, and the loop frees them one by one, each
// handing on its own items the same way; a container another Value still shares is left to
// that owner. The depth of the C++ stack stays constant whatever the nesting.
Value::~Value() {
  std::vector<Value> pending;
  release_items(pending);
  while (!pending.empty()) {
    Value next = std::move(pending.back());
    pending.pop_back();
    next.release_items(pending);
  }  // `next` holds an emptied container (or a shared one) when it is destroyed: no recursion
}

void Value::release_items(std::vector<Value>& pending) {
  const auto take_list = [&pending](std::shared_ptr<List>& items) {
    if (items && items.use_count() == 1) {
      for (auto& item : *items) pending.push_back(std::move(item));
      items->clear();
    }
  };
  if (auto* list = std::get_if<ListRef>(&data_)) {
    take_list(list->items);
  } else if (auto* tuple = std::get_if<TupleRef>(&data_)) {
    take_list(tuple->items);
  } else if (auto* dict = std::get_if<std::shared_ptr<Dict>>(&data_)) {
    if (*dict && dict->use_count() == 1) {
      for (auto& item : (*dict)->items) pending.push_back(std::move(item.second));
      (*dict)->items.clear();
    }
  }
}

Value& Value::operator=(const Value& other) {
  Value copy(other);
  std::swap(data_, copy.data_);
  return *this;
}

Value& Value::operator=(Value&& other) noexcept {
  Value moved(std::move(other));
  std::swap(data_, moved.data_);
  return *this;
}

std::string Value::describe() const {
  return std::visit(
      [](const auto& data) -> std::string {
        using T = std::decay_t<decltype(data)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "None";
        if constexpr (std::is_same_v<T, bool>) return "bool";
        if constexpr (std::is_same_v<T, int64_t>) return "int";
        if constexpr (std::is_same_v<T, double>) return "float";
        if constexpr (std::is_same_v<T, std::string>) return "str";
        if constexpr (std::is_same_v<T, Bytes>) return "bytes";
        if constexpr (std::is_same_v<T, TensorRef>) return "tensor";
        if constexpr (std::is_same_v<T, ListRef>) return "list";
        if constexpr (std::is_same_v<T, TupleRef>) return "tuple";
        if constexpr (std::is_same_v<T, std::shared_ptr<Dict>>) return "dict";
        if constexpr (std::is_same_v<T, Opaque>) {
          return data.module + "." + data.name + (data.instance ? "" : " (a class or function)");
        }
        if constexpr (std::is_same_v<T, Storage>) return "storage";
        return "value";
      },
      data_);
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [name, value] : items) {
    if (const auto* text = std::get_if<std::string>(&name); text && *text == key) return &value;
  }
  return nullptr;
}

namespace {

std::string record_text(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name) {
  auto [data, size] = zip.getRecord(name);
  return {static_cast<const char*>(data.get()), size};
}

}  // namespace

TorchSaveFile::TorchSaveFile(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary)) throw TorchSaveError("cannot open " + path);
  std::string pickle;
  try {
    zip_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
    if (zip_->hasRecord("byteorder") && record_text(*zip_, "byteorder") != "little") {
      throw TorchSaveError(
          "the file was saved on a big-endian machine; this reader reads "
          "little-endian files only");
    }
    if (!zip_->hasRecord("data.pkl")) {
      throw TorchSaveError("the zip file has no data.pkl record: it is not a torch.save file");
    }
    pickle = record_text(*zip_, "data.pkl");
  } catch (const c10::Error& error) {
    throw TorchSaveError(
        "not a readable torch.save zip file (PyTorch >= 1.6 format; damaged or truncated?): " +
        std::string(error.what_without_backtrace()));
  }
  root_ = unpickle(pickle, [this](const std::string& key) -> int64_t {
    const std::string name = "data/" + key;
    try {
      return zip_->hasRecord(name) ? static_cast<int64_t>(zip_->getRecordSize(name)) : -1;
    } catch (const c10::Error&) {
      return -1;
    }
  });
}

TorchSaveFile::~TorchSaveFile() = default;

torch::Tensor TorchSaveFile::read(const TensorRef& ref) {
  const Storage& storage = ref.storage;
  const int64_t item_bytes = static_cast<int64_t>(c10::elementSize(storage.dtype));
  torch::Tensor bytes;
  try {
    const std::string name = "data/" + storage.key;
    const auto record_bytes = static_cast<int64_t>(zip_->getRecordSize(name));
    if (record_bytes < storage.numel * item_bytes) {
      throw TorchSaveError("record " + name + " has " + std::to_string(record_bytes) +
                           " bytes, its storage needs " +
                           std::to_string(storage.numel * item_bytes));
    }
    bytes = torch::empty({record_bytes}, torch::kUInt8);
    if (record_bytes > 0) {
      zip_->getRecord(name, bytes.data_ptr(), static_cast<size_t>(record_bytes));
    }
  } catch (const c10::Error& error) {
    throw TorchSaveError("cannot read storage " + storage.key + ": " +
                         error.what_without_backtrace());
  }
  const torch::Tensor elements = bytes.slice(0, 0, storage.numel * item_bytes).view(storage.dtype);
  return elements.as_strided(ref.size, ref.stride, ref.offset).clone(at::MemoryFormat::Contiguous);
}

}  // namespace scalebench::torch_save
