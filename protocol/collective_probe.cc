#include "protocol/collective_probe.h"

#include "common/base/error.h"

namespace scalebench {

std::vector<int64_t> probe_sizes(const ProbeOptions& options) {
  if (options.min_bytes < 4 || options.max_bytes < options.min_bytes || options.factor < 2) {
    throw InputError("probe sizes: need 4 <= --min-bytes <= --max-bytes and --factor >= 2 (got " +
                     std::to_string(options.min_bytes) + ", " + std::to_string(options.max_bytes) +
                     ", " + std::to_string(options.factor) + ")");
  }
  std::vector<int64_t> sizes;
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
    sizes.push_back(bytes / 4 * 4);
    if (bytes > options.max_bytes / options.factor) break;  // the next one would overflow
  }
  return sizes;
}

}  // namespace scalebench
