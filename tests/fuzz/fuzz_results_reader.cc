// libFuzzer target: the results-file reader (`scalebench info`, --resume) on arbitrary
// bytes written to a file. Only InputError/Error (a clear message) may leave it; a crash,
// an abort or a sanitizer report is a bug. Seeds: results files written by the tests.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/base/error.h"
#include "results/reader.h"
#include "results/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/scalebench-fuzz-" + std::to_string(getpid()) + ".h5";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)scalebench::read_results_overview(path);
  } catch (const scalebench::Error&) {
  }
  return 0;
}
