// See Note [Stored matrix text] in matrix/stored_text.h.
#include "matrix/stored_text.h"

#include <yaml-cpp/yaml.h>

namespace scalebench {
namespace {

/// Where a node sits, as far as the rule cares: inside a `program:` mapping, or its `env:`.
enum class Place { kOther, kProgram, kEnv };

struct Hiding {
  const EnvValueRule& stored;
  const std::string& replacement;
};

std::string scalar_text(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : ""; }

/// Whether some program env value under `node` is one `hiding.stored` refuses.
bool hides_any(const YAML::Node& node, Place place, const Hiding& hiding) {
  if (node.IsSequence()) {
    for (const auto& item : node) {
      if (hides_any(item, Place::kOther, hiding)) return true;
    }
  } else if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = scalar_text(entry.first);
      if (place == Place::kEnv) {
        if (!hiding.stored(key, scalar_text(entry.second))) return true;
        continue;
      }
      const Place inner = key == "program"                             ? Place::kProgram
                          : (place == Place::kProgram && key == "env") ? Place::kEnv
                                                                       : Place::kOther;
      if (hides_any(entry.second, inner, hiding)) return true;
    }
  }
  return false;
}

void emit(YAML::Emitter& out, const YAML::Node& node, Place place, const Hiding& hiding);

void emit_scalar(YAML::Emitter& out, const YAML::Node& node) {
  const std::string& tag = node.Tag();
  if (tag == "!") {  // quoted in the file: a string, whatever it looks like ("1", "true")
    out << YAML::DoubleQuoted << node.Scalar();
    return;
  }
  if (!tag.empty() && tag != "?") out << YAML::VerbatimTag(tag);
  out << node.Scalar();
}

void emit_map(YAML::Emitter& out, const YAML::Node& node, Place place, const Hiding& hiding) {
  if (node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
  out << YAML::BeginMap;
  for (const auto& entry : node) {
    out << YAML::Key;
    emit(out, entry.first, Place::kOther, hiding);
    out << YAML::Value;
    const std::string key = scalar_text(entry.first);
    if (place == Place::kEnv) {
      if (hiding.stored(key, scalar_text(entry.second))) {
        emit(out, entry.second, Place::kOther, hiding);
      } else {
        out << YAML::DoubleQuoted << hiding.replacement;
      }
      continue;
    }
    const Place inner = key == "program"                             ? Place::kProgram
                        : (place == Place::kProgram && key == "env") ? Place::kEnv
                                                                     : Place::kOther;
    emit(out, entry.second, inner, hiding);
  }
  out << YAML::EndMap;
}

void emit(YAML::Emitter& out, const YAML::Node& node, Place place, const Hiding& hiding) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      emit_map(out, node, place, hiding);
      break;
    case YAML::NodeType::Sequence:
      if (node.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
      out << YAML::BeginSeq;
      for (const auto& item : node) emit(out, item, Place::kOther, hiding);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      emit_scalar(out, node);
      break;
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out << YAML::Null;
      break;
  }
}

}  // namespace

std::string stored_matrix_text(const std::string& text, const std::string& format,
                               const EnvValueRule& stored, const std::string& replacement) {
  if (format != "yaml") return text;
  const Hiding hiding{stored, replacement};
  // Not const: each return moves it out.
  std::string unreadable =
      "# scalebench: the matrix text is not stored (it did not parse again, so its program env "
      "values could not be told apart)\n";
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return unreadable;
  }
  if (!hides_any(root, Place::kOther, hiding)) return text;
  YAML::Emitter out;
  emit(out, root, Place::kOther, hiding);
  if (!out.good()) return unreadable;
  return "# scalebench: the matrix as parsed, program env values that are not stored written " +
         replacement + " (docs/programs.md#what-is-stored); the file's comments are not kept\n" +
         out.c_str() + "\n";
}

}  // namespace scalebench
