// The pickle interpreter of torch_save_reader.h: data.pkl to a Value, executing nothing.

// Note [Reading torch.save files without Python]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Users have checkpoints made by torch.save(model.state_dict()) (an OrderedDict, whose
// class and `_metadata` attribute torch::pickle_load refuses) and Lightning `.ckpt` files
// (a dict whose `hyper_parameters`, `callbacks` and `loops` may pickle any Python class:
// omegaconf.DictConfig, the user's own). Neither needs Python to be read: a torch.save
// file is a zip (PyTorchStreamReader reads it) holding `<archive>/data.pkl` and one record
// `<archive>/data/<key>` per storage.
//
// The interpreter below knows the opcodes of protocols 2 to 5 that pickle emits for
// dicts, lists, tuples, sets, scalars, strings and bytes, the memo, and the object
// opcodes. It interprets six kinds of global and nothing else:
//   * torch.<T>Storage (FloatStorage, BFloat16Storage, ..., UntypedStorage) in a
//     BINPERSID ('storage', <class>, key, location, numel): a Storage of that dtype,
//     checked against the size of record data/<key>;
//   * torch._utils._rebuild_tensor / _rebuild_tensor_v2 (storage, offset, size, stride,
//     ...): a TensorRef, checked to lie inside its storage;
//   * torch._utils._rebuild_parameter[_with_state] (tensor, ...): the tensor;
//   * torch._tensor._rebuild_from_type_v2 (function, class, args, state): the function
//     applied to args (a tensor subclass is read as its tensor);
//   * collections.OrderedDict: a dict (its BUILD state, `_metadata`, is dropped);
//   * torch.jit._pickle.restore_type_tag (value, type), of torch::pickle_save: the value.
// Every other global is an Opaque value; REDUCE, NEWOBJ and BUILD on it make an Opaque
// instance and items appended or set on it are dropped. Nothing is imported, called or
// constructed, so a file cannot run code here: the worst a crafted file does is fail with
// a TorchSaveError. Every length is checked against the bytes left before it is used, and
// the memo is a map, so no size in the file makes an allocation larger than the file.
// Rejected: torch::pickle_load (refuses both formats above), calling into Python (the
// worker has no interpreter, and unpickling runs arbitrary code).
#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "worker/torch_save_reader.h"

namespace scalebench::torch_save {
namespace {

/// The storage classes torch.save names, and their dtypes.
c10::ScalarType storage_dtype(const Opaque& type) {
  static const std::vector<std::pair<std::string, c10::ScalarType>> kTypes = {
      {"FloatStorage", c10::ScalarType::Float},
      {"DoubleStorage", c10::ScalarType::Double},
      {"HalfStorage", c10::ScalarType::Half},
      {"BFloat16Storage", c10::ScalarType::BFloat16},
      {"LongStorage", c10::ScalarType::Long},
      {"IntStorage", c10::ScalarType::Int},
      {"ShortStorage", c10::ScalarType::Short},
      {"CharStorage", c10::ScalarType::Char},
      {"ByteStorage", c10::ScalarType::Byte},
      {"BoolStorage", c10::ScalarType::Bool},
      {"ComplexFloatStorage", c10::ScalarType::ComplexFloat},
      {"ComplexDoubleStorage", c10::ScalarType::ComplexDouble},
      {"UntypedStorage", c10::ScalarType::Byte},
  };
  if (type.module == "torch" && !type.instance) {
    for (const auto& [name, dtype] : kTypes) {
      if (name == type.name) return dtype;
    }
  }
  throw TorchSaveError("a tensor's storage has type " + type.module + "." + type.name +
                       ", which this reader does not know (known: Float, Double, Half, "
                       "BFloat16, Long, Int, Short, Char, Byte, Bool, ComplexFloat, "
                       "ComplexDouble)");
}

bool is_global(const Value& value, const char* module, const char* name) {
  if (!value.is<Opaque>()) return false;
  const auto& global = value.as<Opaque>();
  return !global.instance && global.module == module && global.name == name;
}

class Unpickler {
 public:
  Unpickler(const std::string& pickle,
            const std::function<int64_t(const std::string&)>& storage_bytes)
      : data_(pickle), storage_bytes_(storage_bytes) {}

  Value run() {
    while (true) {
      op_offset_ = pos_;
      const auto op = static_cast<uint8_t>(take(1)[0]);
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.size() != 1)
      fail("the pickle ends with " + std::to_string(stack_.size()) +
           " values on its stack instead of one");
    return stack_.back();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TorchSaveError("data.pkl at offset " + std::to_string(op_offset_) + ": " + what);
  }

  std::string_view take(size_t n) {
    if (n > data_.size() - pos_) fail("truncated (needs " + std::to_string(n) + " more bytes)");
    const std::string_view out(data_.data() + pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t unsigned_le(size_t n) {
    const auto bytes = take(n);
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    return value;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("truncated (a line without its newline)");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  size_t length(size_t n) {
    const uint64_t size = unsigned_le(n);
    if (size > data_.size() - pos_) fail("a length of " + std::to_string(size) + " past the end");
    return size;
  }

  Value pop() {
    if (stack_.size() <= floor()) fail("pops an empty stack");
    Value top = std::move(stack_.back());
    stack_.pop_back();
    return top;
  }
  Value& top() {
    if (stack_.size() <= floor()) fail("reads an empty stack");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  /// The values above the topmost MARK, which is removed.
  List pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t mark = marks_.back();
    marks_.pop_back();
    List items(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(mark)),
               std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  Value tuple(List items) { return TupleRef{std::make_shared<List>(std::move(items))}; }

  void append(Value& target, List items) {
    if (target.is<ListRef>()) {
      auto& list = *target.as<ListRef>().items;
      for (auto& item : items) list.push_back(std::move(item));
    } else if (!target.is<Opaque>()) {  // items of an opaque list subclass are dropped
      fail("appends to a " + target.describe());
    }
  }
  void set_items(Value& target, List items) {
    if (items.size() % 2 != 0) fail("sets a key without a value");
    const auto dict = target.dict();
    if (!dict) {
      if (target.is<Opaque>()) return;  // a dict subclass (defaultdict, ...): dropped
      fail("sets items on a " + target.describe());
    }
    for (size_t i = 0; i < items.size(); i += 2) {
      const Value& key = items[i];
      if (key.is<std::string>()) {
        dict->items.emplace_back(key.as<std::string>(), std::move(items[i + 1]));
      } else if (key.is<int64_t>() || key.is<bool>()) {
        const int64_t number = key.is<bool>() ? int64_t{key.as<bool>()} : key.as<int64_t>();
        dict->items.emplace_back(number, std::move(items[i + 1]));
      } else {
        ++dict->other_keys;
      }
    }
  }

  Value memo_get(uint64_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
    return copied(found->second);
  }

  /// `value`, counting the text it copies: strings and bytes are held by value, so DUP,
  /// the memo's puts and gets copy them. A file that makes the copies outgrow a few times
  /// its own size is refused (a damaged or hostile data.pkl could otherwise ask for
  /// gigabytes with a few bytes per copy).
  const Value& copied(const Value& value) {
    size_t size = 0;
    if (value.is<std::string>()) size = value.as<std::string>().size();
    if (value.is<Bytes>()) size = value.as<Bytes>().data.size();
    copied_bytes_ += size;
    if (copied_bytes_ > 4 * data_.size() + (size_t{1} << 20)) {
      fail("copies " + std::to_string(copied_bytes_) + " bytes of text from " +
           std::to_string(data_.size()) + " bytes of pickle (a damaged or hostile file)");
    }
    return value;
  }

  Value integer_from_le(std::string_view bytes) {
    if (bytes.size() > 8) return Opaque{"builtins", "int", true};  // beyond int64
    uint64_t value = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
      value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    }
    if (!bytes.empty() && bytes.size() < 8 && (static_cast<uint8_t>(bytes.back()) & 0x80)) {
      value |= ~uint64_t{0} << (8 * bytes.size());  // sign-extend
    }
    return static_cast<int64_t>(value);
  }

  /// BINPERSID ('storage', <storage class>, key, location, numel).
  Value persistent_load(const Value& id) {
    const List* fields = id.is<TupleRef>() ? id.as<TupleRef>().items.get() : nullptr;
    if (!fields || fields->size() != 5 || !(*fields)[0].is<std::string>() ||
        (*fields)[0].as<std::string>() != "storage" || !(*fields)[1].is<Opaque>() ||
        !(*fields)[2].is<std::string>() || !(*fields)[4].is<int64_t>()) {
      fail("a persistent id that is not ('storage', type, key, location, numel)");
    }
    Storage storage{(*fields)[2].as<std::string>(), storage_dtype((*fields)[1].as<Opaque>()),
                    (*fields)[4].as<int64_t>()};
    const int64_t bytes = storage_bytes_(storage.key);
    const int64_t item_bytes = static_cast<int64_t>(c10::elementSize(storage.dtype));
    if (storage.numel < 0 || bytes < 0 || storage.numel > bytes / item_bytes) {
      fail("storage " + storage.key + " of " + std::to_string(storage.numel) + " elements has " +
           (bytes < 0 ? "no record" : std::to_string(bytes) + " bytes"));
    }
    return storage;
  }

  std::vector<int64_t> int_tuple(const Value& value, const char* what) {
    if (!value.is<TupleRef>()) fail(std::string("a tensor whose ") + what + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& item : *value.as<TupleRef>().items) {
      if (!item.is<int64_t>() || item.as<int64_t>() < 0) {
        fail(std::string("a tensor whose ") + what + " is not non-negative integers");
      }
      out.push_back(item.as<int64_t>());
    }
    return out;
  }

  /// _rebuild_tensor(_v2)(storage, offset, size, stride, ...).
  Value rebuild_tensor(const List& args) {
    if (args.size() < 4 || !args[0].is<Storage>() || !args[1].is<int64_t>()) {
      fail("_rebuild_tensor_v2 without (storage, offset, size, stride)");
    }
    TensorRef ref{args[0].as<Storage>(), args[1].as<int64_t>(), int_tuple(args[2], "size"),
                  int_tuple(args[3], "stride")};
    if (ref.size.size() != ref.stride.size()) fail("a tensor whose size and stride differ in rank");
    if (ref.offset < 0) fail("a tensor with a negative storage offset");  // before any arithmetic
    int64_t last = ref.offset;  // the last element the view reads, when it reads any
    bool empty = false;
    for (size_t d = 0; d < ref.size.size(); ++d) {
      if (ref.size[d] == 0) empty = true;
      if (ref.size[d] > 0 && ref.stride[d] > (INT64_MAX - last) / ref.size[d]) {
        fail("a tensor whose strides overflow");
      }
      if (ref.size[d] > 0) last += (ref.size[d] - 1) * ref.stride[d];
    }
    if (ref.offset < 0 || (!empty && last >= ref.storage.numel)) {
      fail("a tensor of size " + c10::str(ref.size) + " reads past its storage " + ref.storage.key +
           " of " + std::to_string(ref.storage.numel) + " elements");
    }
    return ref;
  }

  /// REDUCE: `callable(*args)` for the globals of Note [Reading torch.save files without
  /// Python], an Opaque instance for any other.
  Value reduce(const Value& callable, const List& args) {
    if (!callable.is<Opaque>()) fail("calls a " + callable.describe());
    const auto& global = callable.as<Opaque>();
    if (global.instance) return Opaque{global.module, global.name, true};
    if (global.module == "torch._utils" &&
        (global.name == "_rebuild_tensor_v2" || global.name == "_rebuild_tensor")) {
      return rebuild_tensor(args);
    }
    if (global.module == "torch._utils" &&
        (global.name == "_rebuild_parameter" || global.name == "_rebuild_parameter_with_state")) {
      if (args.empty()) fail("_rebuild_parameter without a tensor");
      return args[0];
    }
    if (global.module == "torch._tensor" && global.name == "_rebuild_from_type_v2") {
      if (args.size() < 3 || !args[2].is<TupleRef>()) fail("_rebuild_from_type_v2 without args");
      return reduce(args[0], *args[2].as<TupleRef>().items);
    }
    if (global.module == "torch.jit._pickle" && global.name == "restore_type_tag") {
      if (args.empty()) fail("restore_type_tag without a value");
      return args[0];  // torch::pickle_save's typed containers: the type string is dropped
    }
    if (global.module == "collections" && global.name == "OrderedDict") {
      Value dict = std::make_shared<Dict>();
      if (!args.empty() && args[0].is<ListRef>()) {  // OrderedDict([(key, value), ...])
        List flat;
        for (const auto& pair : *args[0].as<ListRef>().items) {
          if (!pair.is<TupleRef>() || pair.as<TupleRef>().items->size() != 2) {
            fail("OrderedDict of something other than pairs");
          }
          for (const auto& item : *pair.as<TupleRef>().items) flat.push_back(item);
        }
        set_items(dict, std::move(flat));
      }
      return dict;
    }
    return Opaque{global.module, global.name, true};
  }

  /// NEWOBJ / NEWOBJ_EX: `cls.__new__(cls, ...)`.
  Value new_object(const Value& cls) {
    if (is_global(cls, "collections", "OrderedDict")) return std::make_shared<Dict>();
    if (!cls.is<Opaque>()) fail("NEWOBJ on a " + cls.describe());
    return Opaque{cls.as<Opaque>().module, cls.as<Opaque>().name, true};
  }

  void step(uint8_t op);

  const std::string& data_;
  const std::function<int64_t(const std::string&)>& storage_bytes_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  List stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  size_t copied_bytes_ = 0;  ///< text copied by DUP and the memo (copied())
};

void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80:
      take(1);
      return;  // PROTO
    case 0x95:
      take(8);
      return;  // FRAME: frames only group opcodes
    case '(':
      marks_.push_back(stack_.size());
      return;  // MARK
    case '0':
      pop();
      return;  // POP
    case '1':
      pop_mark();
      return;  // POP_MARK
    case '2':
      stack_.push_back(copied(top()));
      return;  // DUP
    case 'N':
      stack_.emplace_back();
      return;  // NONE
    case 0x88:
      stack_.emplace_back(true);
      return;  // NEWTRUE
    case 0x89:
      stack_.emplace_back(false);
      return;  // NEWFALSE
    case 'J':
      stack_.emplace_back(integer_from_le(take(4)));
      return;  // BININT
    case 'K':
      stack_.emplace_back(static_cast<int64_t>(unsigned_le(1)));
      return;  // BININT1
    case 'M':
      stack_.emplace_back(static_cast<int64_t>(unsigned_le(2)));
      return;  // BININT2
    case 0x8a:
      stack_.emplace_back(integer_from_le(take(length(1))));
      return;  // LONG1
    case 0x8b:
      stack_.emplace_back(integer_from_le(take(length(4))));
      return;    // LONG4
    case 'I': {  // INT (protocol 0; "01"/"00" are True/False)
      const std::string text = line();
      if (text == "01" || text == "00") {
        stack_.emplace_back(text == "01");
      } else {
        try {
          stack_.emplace_back(static_cast<int64_t>(std::stoll(text)));
        } catch (const std::exception&) {
          stack_.emplace_back(Opaque{"builtins", "int", true});
        }
      }
      return;
    }
    case 'G': {  // BINFLOAT: big-endian IEEE double
      const auto bytes = take(8);
      uint64_t bits = 0;
      for (const char byte : bytes) bits = (bits << 8) | static_cast<uint8_t>(byte);
      double value = 0;
      std::memcpy(&value, &bits, sizeof value);
      stack_.emplace_back(value);
      return;
    }
    case 'X':
      stack_.emplace_back(std::string(take(length(4))));
      return;  // BINUNICODE
    case 0x8c:
      stack_.emplace_back(std::string(take(length(1))));
      return;  // SHORT_BINUNICODE
    case 0x8d:
      stack_.emplace_back(std::string(take(length(8))));
      return;  // BINUNICODE8
    case 'T':
      stack_.emplace_back(std::string(take(length(4))));
      return;  // BINSTRING
    case 'U':
      stack_.emplace_back(std::string(take(length(1))));
      return;  // SHORT_BINSTRING
    case 'B':
      stack_.emplace_back(Bytes{std::string(take(length(4)))});
      return;  // BINBYTES
    case 'C':
      stack_.emplace_back(Bytes{std::string(take(length(1)))});
      return;   // SHORT_BINBYTES
    case 0x8e:  // BINBYTES8
    case 0x96:  // BYTEARRAY8
      stack_.emplace_back(Bytes{std::string(take(length(8)))});
      return;
    case ']':   // EMPTY_LIST
    case 0x8f:  // EMPTY_SET: a list (nothing here needs set semantics)
      stack_.emplace_back(ListRef{std::make_shared<List>()});
      return;
    case 'l':   // LIST
    case 0x91:  // FROZENSET
      stack_.emplace_back(ListRef{std::make_shared<List>(pop_mark())});
      return;
    case 'a': {  // APPEND
      Value item = pop();
      append(top(), List{std::move(item)});
      return;
    }
    case 'e':     // APPENDS
    case 0x90: {  // ADDITEMS
      List items = pop_mark();
      append(top(), std::move(items));
      return;
    }
    case ')':
      stack_.push_back(tuple({}));
      return;  // EMPTY_TUPLE
    case 't':
      stack_.push_back(tuple(pop_mark()));
      return;     // TUPLE
    case 0x85:    // TUPLE1
    case 0x86:    // TUPLE2
    case 0x87: {  // TUPLE3
      List items(op - 0x84);
      for (auto item = items.rbegin(); item != items.rend(); ++item) *item = pop();
      stack_.push_back(tuple(std::move(items)));
      return;
    }
    case '}':
      stack_.emplace_back(std::make_shared<Dict>());
      return;    // EMPTY_DICT
    case 'd': {  // DICT
      Value dict = std::make_shared<Dict>();
      set_items(dict, pop_mark());
      stack_.push_back(std::move(dict));
      return;
    }
    case 's': {  // SETITEM
      Value value = pop();
      Value key = pop();
      set_items(top(), List{std::move(key), std::move(value)});
      return;
    }
    case 'u': {  // SETITEMS
      List items = pop_mark();
      set_items(top(), std::move(items));
      return;
    }
    case 'q':
      memo_[unsigned_le(1)] = copied(top());
      return;  // BINPUT
    case 'r':
      memo_[unsigned_le(4)] = copied(top());
      return;     // LONG_BINPUT
    case 0x94: {  // MEMOIZE
      const uint64_t index = memo_.size();
      memo_[index] = copied(top());
      return;
    }
    case 'h':
      stack_.push_back(memo_get(unsigned_le(1)));
      return;  // BINGET
    case 'j':
      stack_.push_back(memo_get(unsigned_le(4)));
      return;    // LONG_BINGET
    case 'p': {  // PUT
      const std::string text = line();
      memo_[std::strtoull(text.c_str(), nullptr, 10)] = copied(top());
      return;
    }
    case 'g': {  // GET
      const std::string text = line();
      stack_.push_back(memo_get(std::strtoull(text.c_str(), nullptr, 10)));
      return;
    }
    case 'c': {  // GLOBAL "module\nname\n"
      std::string module = line();
      std::string name = line();
      stack_.emplace_back(Opaque{std::move(module), std::move(name), false});
      return;
    }
    case 0x93: {  // STACK_GLOBAL
      const Value name = pop();
      const Value module = pop();
      if (!module.is<std::string>() || !name.is<std::string>()) {
        fail("STACK_GLOBAL of something other than two strings");
      }
      stack_.emplace_back(Opaque{module.as<std::string>(), name.as<std::string>(), false});
      return;
    }
    case 'R': {  // REDUCE
      const Value args = pop();
      const Value callable = pop();
      if (!args.is<TupleRef>()) fail("REDUCE with arguments that are not a tuple");
      stack_.push_back(reduce(callable, *args.as<TupleRef>().items));
      return;
    }
    case 0x81: {  // NEWOBJ cls args
      pop();
      const Value cls = pop();
      stack_.push_back(new_object(cls));
      return;
    }
    case 0x92: {  // NEWOBJ_EX cls args kwargs
      pop();
      pop();
      const Value cls = pop();
      stack_.push_back(new_object(cls));
      return;
    }
    case 'b':
      pop();
      top();
      return;    // BUILD: the state (__setstate__) is never applied
    case 'Q': {  // BINPERSID
      const Value id = pop();
      stack_.push_back(persistent_load(id));
      return;
    }
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      fail(std::string("opcode ") + hex +
           (op >= 0x20 && op < 0x7f ? std::string(" ('") + static_cast<char>(op) + "')" : "") +
           " is not one this reader interprets (protocols 2 to 5 as torch.save writes them)");
    }
  }
}

}  // namespace

Value unpickle(const std::string& pickle,
               const std::function<int64_t(const std::string&)>& storage_bytes) {
  return Unpickler(pickle, storage_bytes).run();
}

}  // namespace scalebench::torch_save
