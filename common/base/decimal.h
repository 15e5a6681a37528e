// Whole-text decimal integers: the one parser behind every count, id and setting that
// scalebench reads as text (matrix settings, CytoDL shapes, SCALEBENCH_FAULT, sbatch ids).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace scalebench {

/// `text` as a base-10 integer: an optional '-' and digits, nothing else (no '+', no
/// spaces, no empty text), within int64_t; std::nullopt otherwise. Pure.
std::optional<int64_t> parse_decimal(std::string_view text);

}  // namespace scalebench
