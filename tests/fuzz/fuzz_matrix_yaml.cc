// libFuzzer target: the YAML matrix front end (syntax, duplicate keys, schema, settings,
// expansion) on arbitrary bytes. It must either return cells or throw MatrixError (an
// InputError): any other exception, a crash, a sanitizer report or a slow input is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "matrix/matrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    scalebench::load_matrix_text("fuzz.yaml", text);
  } catch (const scalebench::InputError&) {
  }
  return 0;
}
