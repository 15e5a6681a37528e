// Every key the schemas allow (the files plus the settings table, as scalebench loads them)
// is documented in docs/matrix-reference.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "common/base/build_info.h"
#include "matrix/schema.h"

namespace {

const std::filesystem::path kSource(scalebench::build_info::source_dir());

void collect_properties(const nlohmann::json& node, std::set<std::string>& names) {
  if (node.is_object()) {
    if (node.contains("properties") && node["properties"].is_object()) {
      for (const auto& [name, value] : node["properties"].items()) names.insert(name);
    }
    for (const auto& [key, value] : node.items()) collect_properties(value, names);
  } else if (node.is_array()) {
    for (const auto& item : node) collect_properties(item, names);
  }
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(MatrixDocsTest, EverySchemaPropertyIsDocumented) {
  const std::string doc = read(kSource / "docs" / "matrix-reference.md");
  ASSERT_FALSE(doc.empty());
  std::set<std::string> names;
  for (const char* file : {"matrix.schema.json", "experiment.schema.json"}) {
    collect_properties(scalebench::schema_document(file), names);
  }
  EXPECT_GE(names.size(), 30U);
  for (const auto& name : names) {
    // Keys of the nested `optimizer` mapping are documented as `optimizer.<key>`.
    EXPECT_TRUE(doc.find("`" + name + "`") != std::string::npos ||
                doc.find("`optimizer." + name + "`") != std::string::npos)
        << "schema property '" << name << "' is not in docs/matrix-reference.md";
  }
}

}  // namespace
