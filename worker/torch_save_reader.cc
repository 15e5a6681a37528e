#include "worker/torch_save_reader.h"

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>

namespace scalebench::torch_save {

std::shared_ptr<Dict> Value::dict() const {
  return is<std::shared_ptr<Dict>>() ? as<std::shared_ptr<Dict>>() : nullptr;
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
