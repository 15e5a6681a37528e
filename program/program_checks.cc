#include "program/program_checks.h"

#include <algorithm>
#include <stdexcept>

#include "common/base/escaped_text.h"

namespace scalebench {
namespace {

/// Longest text of a record kept (a path, a message): the program's text, bounded.
constexpr std::size_t kMaxTextBytes = 1024;

std::string bounded(const std::string& text) {
  return printable_line(utf8_prefix(text, kMaxTextBytes));
}

std::string text_field(const nlohmann::json& object, const char* key, bool required) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) throw std::invalid_argument(std::string("no text '") + key + "'");
    return "";
  }
  if (!it->is_string()) throw std::invalid_argument(std::string("'") + key + "' is not text");
  return bounded(it->get<std::string>());
}

/// Why a program may have stopped early, by the `ended` record's `by`.
std::string cause_of(const std::string& by) {
  if (by == "max_epochs") {
    return "its epochs ran out before the steps (pass trainer.max_epochs=-1, or "
           "++trainer.max_epochs=-1 where the config lacks the key, with "
           "trainer.max_steps={steps})";
  }
  if (by == "early_stopping") {
    return "an EarlyStopping callback stopped it (remove it for the benchmark: "
           "~callbacks.early_stopping in a Hydra command)";
  }
  if (by == "max_time") return "its max_time ran out (lift trainer.max_time)";
  if (by == "no_batches") return "its training dataloader has no batches";
  if (by == "max_steps") return "its max_steps is not {steps} (pass trainer.max_steps={steps})";
  if (by == "interrupted") return "it was interrupted";
  if (by == "dataloader_end") {  // Note [Lightning evaluation loops]: an inference cell's loop
    return "its dataloader ran out of batches (a dataset of fewer batches than {steps}, or a "
           "limit_*_batches below it)";
  }
  return "";
}

}  // namespace

ProgramCode code_of_record(const nlohmann::json& record) {
  ProgramCode code;
  code.tree = text_field(record, "tree", false);
  code.error = text_field(record, "error", false);
  if (!code.error.empty()) return code;
  code.digest = text_field(record, "digest", true);
  const auto files = record.find("files");
  if (files == record.end() || !files->is_number_integer() || files->get<int64_t>() < 0) {
    throw std::invalid_argument("no file count 'files'");
  }
  code.files = files->get<int64_t>();
  const auto packages = record.find("packages");
  if (packages == record.end() || !packages->is_array()) {
    throw std::invalid_argument("no list 'packages'");
  }
  for (const auto& entry : *packages) {
    if (!entry.is_object()) throw std::invalid_argument("a package entry is not an object");
    ProgramCode::Package package;
    package.name = text_field(entry, "name", true);
    package.file = text_field(entry, "file", true);
    package.origin = text_field(entry, "origin", false);
    const auto in_tree = entry.find("in_tree");
    if (in_tree == entry.end() || !in_tree->is_boolean()) {
      throw std::invalid_argument("a package entry has no bool 'in_tree'");
    }
    package.in_tree = in_tree->get<bool>();
    code.packages.push_back(std::move(package));
  }
  return code;
}

std::optional<std::string> steps_reason(int64_t warmup, int64_t measured, int64_t run,
                                        const std::string& ended_by,
                                        const std::string& ended_message) {
  const int64_t asked = warmup + measured;
  const int64_t margin = std::max<int64_t>(1, asked / 10);
  if (run == 0 || run == asked || (run > asked && run <= asked + margin)) {
    return std::nullopt;
  }
  const int64_t measured_run = std::max<int64_t>(0, run - warmup);
  std::string reason = "steps: the program ran " + std::to_string(run) + " steps, " +
                       std::to_string(asked) + " were asked (" + std::to_string(warmup) +
                       " warm-up + " + std::to_string(measured) + " measured), so " +
                       std::to_string(measured_run) + " were measured";
  if (run > asked) {
    return reason +
           ": it does not stop at {steps}; pass {steps} (or {warmup} and {iterations}) as its "
           "step limit, e.g. trainer.max_steps={steps}" +
           (ended_message.empty() ? "" : " (it reported: " + ended_message + ")");
  }
  if (!ended_by.empty()) {
    const std::string cause = cause_of(ended_by);
    return reason + ": it ended by " + ended_by + (cause.empty() ? "" : ", " + cause) +
           (ended_message.empty() ? "" : " (" + ended_message + ")");
  }
  return reason +
         ": likely causes: trainer.max_epochs (an epoch of fewer batches than the steps; pass "
         "trainer.max_epochs=-1), limit_train_batches, an EarlyStopping callback "
         "(~callbacks.early_stopping), or a dataset shorter than the steps";
}

std::vector<std::string> code_reasons(const ProgramCode& code) {
  std::vector<std::string> reasons;
  for (const auto& package : code.packages) {
    if (package.in_tree || package.file.empty()) continue;
    reasons.push_back(
        "code identity: the branch's package '" + package.name + "' was imported from " +
        package.file + (package.origin.empty() ? "" : " (" + package.origin + ")") +
        ", not from the branch's tree " + code.tree +
        ": the cell measured that code, not the branch's. Put the tree first on the path "
        "(env: {PYTHONPATH: \".\"} in the experiment or the program template) or install the "
        "tree in the branch's prepare step (pip install -e .)");
  }
  return reasons;
}

void record_program_checks(RankResult& result, const ProgramReport& report, const CellSpec& cell) {
  if (result.status != CellStatus::kOk) return;
  // Note [Program profiles]: the profiled steps are not steps run, but those beyond them are.
  const auto profiled = static_cast<int64_t>(report.profiled_step_s.size());
  const auto run = static_cast<int64_t>(report.steps.size()) +
                   std::max<int64_t>(0, profiled - std::max<int64_t>(0, cell.profile_steps));
  result.metrics["program_steps_asked"] =
      static_cast<double>(cell.warmup_iterations + cell.measured_iterations);
  result.metrics["program_steps_run"] = static_cast<double>(run);
  if (!report.ended_by.empty()) result.effective["program_ended_by"] = report.ended_by;
  if (const auto reason = steps_reason(cell.warmup_iterations, cell.measured_iterations, run,
                                       report.ended_by, report.ended_message)) {
    result.untrusted_reasons.push_back(*reason);
  }
  if (!report.code || !report.code->error.empty()) {
    result.effective["program_code_digest"] = "not checked";
    result.ineffective_reasons.push_back(
        report.code
            ? "code identity not checked: the client could not tell (" + report.code->error + ")"
            : "code identity not checked: the program sent no code record (no "
              "scalebench_client, or one older than this scalebench), so which code of "
              "the branch's tree it ran is unknown");
    return;
  }
  const ProgramCode& code = *report.code;
  result.effective["program_code_digest"] = code.digest;
  result.metrics["program_code_files"] = static_cast<double>(code.files);
  std::string packages;
  for (const auto& package : code.packages) {
    if (package.file.empty()) continue;  // not imported
    if (!packages.empty()) packages += "; ";
    packages += package.name + (package.in_tree ? "=tree" : "=" + package.file);
  }
  result.effective["program_code_packages"] = packages.empty() ? "none imported" : packages;
  for (auto& reason : code_reasons(code)) result.untrusted_reasons.push_back(std::move(reason));
}

}  // namespace scalebench
