// What a program cell's worker checks of a run that ended well: the steps it ran against the
// steps asked, and which code of the branch's tree it ran (docs/programs.md). Pure: no
// process, no MPI.
//
// Note [Program steps asked and run]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cell asks for warm-up + iterations steps ({steps}, SCALEBENCH_WARMUP and
// SCALEBENCH_ITERATIONS), but the program decides how many it runs: a Lightning trainer stops
// at whichever of its limits comes first (max_steps, max_epochs, limit_train_batches,
// max_time, an EarlyStopping callback), a script at the end of its dataset. A program that ran
// fewer steps measured fewer iterations than the cell says (and its warm-up may have eaten
// them all); one that ran many more measured another run than asked (a later epoch, another
// learning rate). Either way its figures are not the cell's: the cell stays `ok` (the program
// did run) and is untrusted (RankResult::untrusted_reasons) with both counts and the cause: the
// `ended` record's (the Lightning adapter reads the trainer's limits), else the likely ones.
// "Many more": above asked + max(1, asked / 10), so a program that rounds its steps up to a
// whole batch of its loader is not flagged. A program that reported no step at all is one
// measurement of its wall time (no client), said among the ineffective reasons as before.
// The steps after the measured ones that `profile_steps` asks for are not counted (Note
// [Program profiles]), but the steps a program ran beyond those are.
//
// Note [Program code identity]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A program cell runs in its branch's tree (SCALEBENCH_TREE), but Python imports a package
// from the first entry of sys.path that has it: `python pkg/train.py` puts pkg/ first, not the
// tree, so `import pkg` finds the copy installed in the environment (or an editable install of
// another clone), and every branch runs the same code. The client reports at exit (the `code`
// record, scalebench_client/code_identity.py), for each top-level package or module of the
// tree, the file it was imported from, and the sha256 of the tree's imported sources. A tree
// package imported from outside the tree makes the cell untrusted, naming the package, where
// it came from and the remedy; the digest is stored (effective `program_code_digest`) so that
// `analyze` and `compare` can warn when two branches ran byte-identical code. A program
// without the client (or an older one) sends no record: its digest reads "not checked" and
// the ineffective reasons say so.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/cell/cell_spec.h"
#include "common/cell/messages.h"
#include "program/program_report.h"

namespace scalebench {

/// The `code` record as a ProgramCode (texts bounded and made printable). Throws
/// std::invalid_argument naming the missing or mistyped field.
ProgramCode code_of_record(const nlohmann::json& record);

/// Note [Program steps asked and run]: the sentence that makes the cell untrusted, or nullopt
/// when `run` steps are as asked (`warmup` + `measured`, within the margin) or none ran.
/// `ended_by` / `ended_message`: the program's `ended` record ("" without one).
std::optional<std::string> steps_reason(int64_t warmup, int64_t measured, int64_t run,
                                        const std::string& ended_by,
                                        const std::string& ended_message);

/// Note [Program code identity]: one sentence per tree package imported from outside the tree.
std::vector<std::string> code_reasons(const ProgramCode& code);

/// Records both checks of `report` in `result`: metrics `program_steps_asked`,
/// `program_steps_run`, `program_code_files`; effective `program_code_digest` ("sha256:..."
/// or "not checked"), `program_code_packages` (name=origin, "; "-separated) and
/// `program_ended_by`; the untrusted and ineffective reasons. Only for a rank whose program
/// ended well (`result.status` ok).
void record_program_checks(RankResult& result, const ProgramReport& report, const CellSpec& cell);

}  // namespace scalebench
