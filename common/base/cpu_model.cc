#include "common/base/cpu_model.h"

#include <fstream>
#include <sstream>

namespace scalebench {

std::string cpu_model_from_cpuinfo(const std::string& cpuinfo) {
  for (const char* key : {"model name", "Hardware", "Processor", "cpu model", "uarch"}) {
    std::istringstream lines(cpuinfo);
    for (std::string line; std::getline(lines, line);) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      name.erase(name.find_last_not_of(" \t") + 1);
      if (name != key) continue;
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      value.erase(value.find_last_not_of(" \t\r") + 1);
      if (!value.empty()) return value;
    }
  }
  return "";
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return cpu_model_from_cpuinfo(text.str());
}

}  // namespace scalebench
