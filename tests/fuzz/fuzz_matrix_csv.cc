// libFuzzer target: the CytoDL task CSV reader and its expansion on arbitrary bytes; as
// fuzz_matrix_yaml.cc, only MatrixError may leave it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "matrix/matrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    scalebench::load_matrix_text("fuzz.csv", text);
  } catch (const scalebench::InputError&) {
  }
  return 0;
}
