// Reading a results file as JSON, every part checked: the one reader behind `scalebench
// info`, `run --resume`, the end-of-run series and the tests. Read-only, no lock taken.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace scalebench {

/// Reads a results file for `scalebench info`, `run --resume` and tests, checking every
/// part it reads (Note [Reading damaged files] in results/reader.cc). Throws
/// InputError (one line) for a missing file, a non-scalebench file, another layout major
/// version, or a file HDF5 cannot open or whose /cells cannot be read. Returns
///   {"path": ..., "layout_version": "1.5",
///    "provenance": {every readable root attribute; hosts/devices/argv/environment parsed},
///    "cells": {"<cell_id>": {every cell attribute; spec and ranks parsed,
///                            "datasets": [names], "summary": {attributes} or null}},
///    "damaged_cells": {"<cell_id>": "what is wrong with it, one line"},
///    "problems": ["root attribute 'x' cannot be read", ...]}
/// A damaged cell is in "damaged_cells" only, never in "cells".
nlohmann::json read_results_overview(const std::filesystem::path& path);

/// The "problems" and "damaged_cells" of an overview joined into one line ("" when none).
std::string describe_damage(const nlohmann::json& overview);

}  // namespace scalebench
