#include "protocol/self_test.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base/error.h"

namespace scalebench {

std::string format_self_test(const std::vector<SelfTestCheck>& checks) {
  size_t width = 0;
  for (const auto& check : checks) width = std::max(width, check.name.size());
  std::ostringstream out;
  int passed = 0;
  int failed = 0;
  int skipped = 0;
  for (const auto& check : checks) {
    std::string status = check.status;
    std::transform(status.begin(), status.end(), status.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    out << status << std::string(6 - std::min<size_t>(status.size(), 5), ' ') << check.name
        << std::string(width - check.name.size() + 2, ' ') << check.detail << "\n";
    passed += check.status == "pass" ? 1 : 0;
    failed += check.status == "fail" ? 1 : 0;
    skipped += check.status == "skip" ? 1 : 0;
  }
  out << "selftest: " << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return out.str();
}

std::string to_json_text(const std::vector<SelfTestCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& check : checks) {
    out.push_back({{"name", check.name}, {"status", check.status}, {"detail", check.detail}});
  }
  return out.dump();
}

std::vector<SelfTestCheck> self_test_checks_from_json_text(const std::string& text) {
  try {
    std::vector<SelfTestCheck> checks;
    for (const auto& item : nlohmann::json::parse(text)) {
      checks.push_back({item.at("name").get<std::string>(), item.at("status").get<std::string>(),
                        item.at("detail").get<std::string>()});
    }
    return checks;
  } catch (const nlohmann::json::exception& error) {
    throw FatalError(std::string("malformed self-test report from the workers: ") + error.what());
  }
}

}  // namespace scalebench
