// Expansion of a MatrixRequest into cells, with the semantic checks. See matrix_request.h.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "common/base/escaped_text.h"
#include "common/cell/program.h"
#include "common/cell/settings.h"
#include "common/cell/zoo_names.h"
#include "matrix/program_placeholder_check.h"
#include "matrix/request.h"
#include "matrix/text.h"

namespace scalebench {
namespace {

using WrittenSetting = Setting<std::vector<SettingValue>>;

/// The experiment's value of `key` if written, else the matrix default's, else nullptr.
const WrittenSetting* pick(const SettingsRequest& own, const SettingsRequest& fallback,
                           const std::string& key) {
  const auto* written = own.find(key);
  return written ? written : fallback.find(key);
}

/// Where a resolved value came from: its own position, or the experiment's entry.
SourceLocation origin(const WrittenSetting* setting, const SourceLocation& experiment) {
  return setting && setting->where.line > 0 ? setting->where : experiment;
}

template <typename T>
SourceLocation origin(const Setting<T>& setting, const SourceLocation& experiment) {
  return setting.value && setting.where.line > 0 ? setting.where : experiment;
}

// Note [Every setting is an axis]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Four settings are axes by name (modes, batch_sizes, world_sizes, precisions: their list
// keys). Any other setting becomes an axis when `sweep` or an experiment gives it as a list
// (`sweep: {channels_last: [false, true], bucket_bytes: [1048576, 26214400]}`): each value
// makes its own cells, its value is in the cell spec and so in the cell id (IdRule), an
// `exclude` rule matches it by its key, and an experiment's own list narrows the sweep's
// as its batch_sizes do. A list of one value is that value. The cells' labels show such a
// setting where it takes more than one value in the experiment (CellSpec::label_settings).
// Rules between settings (backend vs device, momentum vs optimizer) are checked per cell,
// since either side may be swept.

/// One axis of an experiment: its setting and the values it takes, in the written order.
struct Axis {
  const SettingDef* setting;
  std::vector<SettingValue> values;
};

/// Resolved settings of one experiment (axes + the scalar cell fields).
struct Resolved {
  std::vector<Axis> axes;  ///< in table order: the outermost loop first
  CellSpec base;           ///< every field but the axes and the branch
};

// Note [TorchScript num_classes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A zoo model has a default num_classes; a TorchScript model declares none. Only class targets
// need it: a training cell with a class loss (auto, cross_entropy) draws its synthetic ids
// from [0, num_classes) and checks an HDF5 file's ids against it. A float loss takes its
// targets' shape from the model's output (Note [Targets] in worker/batch_source.h) and
// inference reads no targets, so neither asks for it (issue 38: a regression model trained
// with loss: mse on float HDF5 targets, and inference of a file without targets, were
// refused). Such a cell gets num_classes 1, as an AOTInductor package does: synthetic
// inference batches still draw a class id (all 0), the worker's model check is met, and
// the cell id is that of the same cell written with num_classes: 1.
bool torchscript_needs_classes(const CellSpec& cell) {
  return !cell.model.torchscript.empty() && cell.num_classes == 0 && cell.mode == Mode::kTrain &&
         (cell.loss == "auto" || cell.loss == "cross_entropy");
}

class ExperimentResolver {
 public:
  ExperimentResolver(const MatrixRequest& request, const ExperimentRequest& experiment,
                     const MatrixLimits& limits, Diagnostics& diagnostics)
      : defaults_(request.defaults),
        experiment_(experiment),
        limits_(limits),
        diagnostics_(diagnostics) {}

  Resolved resolve() {
    Resolved out;
    resolve_settings(out);
    resolve_model(out.base);
    check_combinations(out);
    out.base.experiment = experiment_.name;
    out.base.data = experiment_.data;
    out.base.checkpoint = experiment_.checkpoint;
    out.base.source = experiment_.where.file + ":" + std::to_string(experiment_.where.line);
    return out;
  }

 private:
  void error(const SourceLocation& where, const std::string& message) {
    diagnostics_.error(where, message);
  }

  [[nodiscard]] const WrittenSetting* get(std::string_view key) const {
    return pick(experiment_.settings, defaults_, std::string(key));
  }
  [[nodiscard]] SourceLocation where(std::string_view key) const {
    return origin(get(key), experiment_.where);
  }

  /// Every row of the settings table: range-checked, then an axis or a field of `base`.
  void resolve_settings(Resolved& out) {
    for (const auto& setting : settings_table()) {
      const WrittenSetting* written = get(setting.key);
      if (!written) {
        if (setting.key == "batch_size") {
          error(experiment_.where,
                "no batch sizes; add sweep.batch_sizes or batch_sizes to the experiment");
        } else if (setting.axis) {
          out.axes.push_back({&setting, {default_value(setting)}});
        }
        continue;  // a scalar keeps CellSpec's default
      }
      bool in_range = true;
      for (const auto& value : *written->value) {
        if (const auto problem = setting_value_problem(setting, value); !problem.empty()) {
          error(origin(written, experiment_.where), problem);
          in_range = false;
        }
      }
      if (!in_range) continue;
      if (setting.axis || written->value->size() > 1) {  // Note [Every setting is an axis]
        out.axes.push_back({&setting, *written->value});
      } else {
        setting.set(out.base, written->value->front());
      }
    }
  }

  /// Rules between settings, and the machine's limits.
  void check_combinations(const Resolved& out) {
    for (const auto& axis : out.axes) {
      if (axis.setting->key != "world_size") continue;
      for (const auto& value : axis.values) {
        const int64_t world = std::get<int64_t>(value);
        if (world > limits_.max_world_size) {
          error(where("world_size"),
                "world size " + std::to_string(world) + " is above the limit of " +
                    std::to_string(limits_.max_world_size) +
                    " workers; use a smaller world size or raise --max-world-size");
        }
      }
    }
  }

 public:
  /// Rules between settings, for one cell (either side may be swept); each problem is
  /// reported once per experiment.
  void check_cell(const CellSpec& cell) {
    if (cell.backend == Backend::kNccl && cell.device == Device::kCpu) {
      error_once(where("backend"),
                 "backend nccl needs device cuda (or auto); use backend mpi or auto for CPU "
                 "cells");
    }
    if (cell.cuda_graphs && cell.mode == Mode::kTrain) {  // Note [CUDA graphs for inference]
      error_once(where("cuda_graphs"),
                 "cuda_graphs captures inference only: a DDP training step is not static "
                 "(gradient buckets are reduced as autograd makes them ready, each phase is "
                 "timed); set it on inference cells, or add exclude: [{mode: train, "
                 "cuda_graphs: true}] when sweeping both");
    }
    if (cell.batch_size == kBatchAuto && cell.min_batch > cell.max_batch) {  // Note [Batch search]
      error_once(where("min_batch"), "min_batch " + std::to_string(cell.min_batch) +
                                         " is above max_batch " + std::to_string(cell.max_batch) +
                                         "; batch_size auto probes from min_batch up to max_batch");
    }
    if (!cell.model.aoti.empty() && cell.mode == Mode::kTrain) {
      error_once(where("mode"),
                 "an AOTInductor package is compiled for inference only (no backward, no "
                 "parameters to train); set modes: [infer] for this experiment, or train its "
                 "eager model (a zoo model or {torchscript: path})");
    }
    if (!cell.model.aoti.empty() && !cell.checkpoint.empty()) {
      error_once(where("checkpoint"),
                 "an AOTInductor package carries its weights compiled in; a checkpoint cannot "
                 "replace them: export the package from the checkpoint's weights "
                 "(python -m scalebench_client.export --checkpoint ...) and remove checkpoint");
    }
    if (!cell.model.aoti.empty() && cell.validate) {
      error_once(where("validate"),
                 "validate: an AOTInductor package cannot be re-run in fp32 inside its cell "
                 "(its weights are compiled in); validate its eager or TorchScript twin, or "
                 "remove validate from this experiment");
    }
    if (!cell.model.replay.empty()) {  // Note [Replay workload]
      if (cell.mode != Mode::kTrain) {
        error_once(where("mode"),
                   "a replay model replays a training step (waits per layer, real gradient "
                   "allreduces); it has no inference: set modes: [train] for this experiment");
      }
      if (cell.validate || cell.profile_steps > 0 || cell.batch_size == kBatchAuto) {
        error_once(where(cell.validate            ? "validate"
                         : cell.profile_steps > 0 ? "profile_steps"
                                                  : "batch_size"),
                   "a replay model computes nothing: validate, profile_steps and batch_size "
                   "auto have nothing to act on; remove them from this experiment "
                   "(docs/replay.md)");
      }
    }
    if (cell.compile != CellSpec{}.compile) {  // Note [Compiled twins]
      if (cell.model.zoo.empty()) {
        error_once(where("compile"),
                   "compile: " + cell.compile +
                       " exports a twin of a zoo model; this experiment's model is a file or a "
                       "program. Export your own model yourself (python -m "
                       "scalebench_client.export) and name each file in an experiment of its "
                       "own (model: {torchscript: ...} / {aoti: ...}), or remove compile");
      } else if (cell.mode == Mode::kTrain) {
        error_once(where("compile"),
                   "compile: " + cell.compile +
                       " runs inference only (an exported twin has no backward); set modes: "
                       "[infer], or add exclude: [{mode: train, compile: " +
                       cell.compile + "}] when sweeping both");
      }
    }
    if (!experiment_.program.command.empty() && (iterations_auto(cell) || warmup_auto(cell))) {
      error_once(where(iterations_auto(cell) ? "iterations" : "warmup"),
                 "iterations/warmup auto are decided inside scalebench's own timed loop; a "
                 "program runs its own loop ({steps} iterations), so give this experiment "
                 "numbers (iterations: 50, warmup: 5)");
    }
    if (torchscript_needs_classes(cell)) {
      error_once(origin(experiment_.num_classes, experiment_.where),
                 "a TorchScript model trained with class targets (loss " + cell.loss +
                     ") needs num_classes, the number of classes its targets are drawn from "
                     "and checked against; set num_classes, or a float loss (loss: mse, l1, "
                     "smooth_l1, bce_with_logits) for regression targets");
    }
    if (cell.optimizer.momentum != 0 && cell.optimizer.name != "sgd") {
      error_once(where("optimizer.momentum"),
                 "momentum applies only to sgd; remove it or use optimizer sgd");
    }
  }

 private:
  void error_once(const SourceLocation& at, const std::string& message) {
    if (reported_.insert(message).second) error(at, message);
  }

  void resolve_model(CellSpec& cell) {
    if (!experiment_.program.command.empty()) {
      resolve_program(cell);
      return;
    }
    cell.model = experiment_.model;
    const auto& shape = experiment_.input_shape;
    const auto& classes = experiment_.num_classes;
    cell.input_shape = shape.value.value_or(std::vector<int64_t>{});
    cell.num_classes = classes.value.value_or(0);
    if (!cell.model.aoti.empty()) {  // docs/own-model.md#aotinductor-packages
      if (cell.input_shape.empty()) {
        error(origin(shape, experiment_.where),
              "an AOTInductor package has no default input shape; set input_shape (one "
              "sample's shape, as exported without the batch dimension)");
      }
      if (cell.num_classes == 0) cell.num_classes = 1;  // unused: inference has no loss
      check_input_elements(cell.input_shape, origin(shape, experiment_.where));
      return;
    }
    if (!cell.model.replay.empty()) {  // the table holds the layers: no shape, no classes
      if (cell.num_classes == 0) cell.num_classes = 1;
      return;
    }
    if (!cell.model.torchscript.empty()) {
      if (cell.input_shape.empty()) {
        error(origin(shape, experiment_.where),
              "a TorchScript model has no default input shape; set input_shape");
      }
      // num_classes 0 stays until the cell's mode and loss are known: check_cell asks for it
      // where class targets need it (Note [TorchScript num_classes]).
      check_input_elements(cell.input_shape, origin(shape, experiment_.where));
      return;
    }
    const ZooModelInfo* zoo = find_zoo_model(cell.model.zoo);
    if (!zoo) {
      const auto suggestion = closest_match(cell.model.zoo, zoo_model_names());
      error(experiment_.model_where,
            "unknown model '" + cell.model.zoo + "'; use a zoo model (" + join(zoo_model_names()) +
                ") or {torchscript: path}" +
                (suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?"));
      return;
    }
    if (cell.input_shape.empty()) cell.input_shape = zoo->default_shape;
    if (cell.num_classes == 0) cell.num_classes = zoo->default_classes;
    if (const auto problem = check_shape(*zoo, cell.input_shape); !problem.empty()) {
      error(origin(shape, experiment_.where), problem);
    }
    check_input_elements(cell.input_shape, origin(shape, experiment_.where));
  }

  /// Note [Program placeholders]: every placeholder of the command and env is known here, so
  /// `validate` reports an unknown one at its line.
  void resolve_program(CellSpec& cell) {
    cell.program = experiment_.program;
    const auto& where = experiment_.program_where;
    if (!experiment_.model.zoo.empty() || !experiment_.model.torchscript.empty() ||
        !experiment_.model.aoti.empty() || !experiment_.model.replay.empty()) {
      error(where, "an experiment has either model or program, not both; remove one");
    }
    std::vector<std::string> texts = cell.program.command;
    for (const auto& [name, value] : cell.program.env) texts.push_back(value);
    const auto& preflight = cell.program.preflight.command;
    texts.insert(texts.end(), preflight.begin(), preflight.end());
    for (const auto& text : texts) {
      try {
        for (const auto& name : placeholder_names(text)) {
          if (!is_program_placeholder(name)) error(where, unknown_placeholder_message(name, text));
        }
      } catch (const std::invalid_argument& e) {
        error(where, e.what());
      }
    }
    // An absolute interpreter is checked here (the reader made a relative path absolute
    // from the matrix file's folder); a bare name is looked up on PATH when the program
    // starts, and the worker reports it missing then.
    const std::string& python = cell.program.python;
    if (!python.empty() && std::filesystem::path(python).is_absolute() &&
        ::access(python.c_str(), X_OK) != 0) {
      error_once(where, "program.python: " + escaped(python) +
                            " is not an executable file; give the interpreter of the "
                            "environment your program needs (e.g. /path/to/venv/bin/python), "
                            "or leave python out to use command[0] as it is");
    }
  }

  void check_input_elements(const std::vector<int64_t>& shape, const SourceLocation& where) {
    int64_t elements = 1;
    for (const int64_t dim : shape) {
      if (dim < 1 || elements > kMaxInputElements / dim) {
        error(where, "input_shape " + format_shape(shape) +
                         " is absurd (more than 2^31 elements per sample); use a smaller shape");
        return;
      }
      elements *= dim;
    }
  }

  const SettingsRequest& defaults_;
  const ExperimentRequest& experiment_;
  const MatrixLimits& limits_;
  Diagnostics& diagnostics_;
  std::set<std::string> reported_;
};

bool matches(const ExcludeRule& rule, const CellSpec& cell) {
  if (rule.experiment && *rule.experiment != cell.experiment) return false;
  if (rule.branch && *rule.branch != cell.branch) return false;
  for (const auto& [key, value] : rule.settings) {
    const SettingDef* setting = find_setting(key);
    if (!setting || setting->get(cell) != value) return false;
  }
  return true;
}

/// TorchScript's profiling graph executor profiles the first calls of a module and compiles
/// an optimised graph on about the third (measured: 20 ms instead of 0.7 ms for a small MLP's
/// training step, docs/own-model.md); warm-up iterations below that put it in the figures.
inline constexpr int kTorchScriptWarmup = 3;

void warn_torchscript_warmup(const CellSpec& base, const SourceLocation& where,
                             Diagnostics& diagnostics) {
  if (base.model.torchscript.empty() || warmup_auto(base) ||
      base.warmup_iterations >= kTorchScriptWarmup) {
    return;
  }
  diagnostics.warning(where,
                      "TorchScript model with warmup " + std::to_string(base.warmup_iterations) +
                          ": the TorchScript executor optimises the graph during its first " +
                          std::to_string(kTorchScriptWarmup) +
                          " calls, which would land in the measured iterations; set warmup: " +
                          std::to_string(kTorchScriptWarmup) + " or more");
}

/// Appends to `out` one cell per combination of the values of axes[i..] on top of `cell`.
void cross_axes(const std::vector<Axis>& axes, size_t i, CellSpec& cell,
                std::vector<CellSpec>& out) {
  if (i == axes.size()) {
    out.push_back(cell);
    return;
  }
  for (const auto& value : axes[i].values) {
    axes[i].setting->set(cell, value);
    cross_axes(axes, i + 1, cell, out);
  }
}

/// Cells of one experiment on one branch, before excludes; `check` sees each as written.
std::vector<CellSpec> cross(const Resolved& resolved, const std::string& branch,
                            const std::string& commit,
                            const std::function<void(const CellSpec&)>& check) {
  CellSpec base = resolved.base;
  base.branch = branch;
  base.commit = commit;
  for (const auto& axis : resolved.axes) {  // Note [Every setting is an axis]
    if (!axis.setting->axis && axis.values.size() > 1) {
      base.label_settings.emplace_back(axis.setting->key);
    }
  }
  std::vector<CellSpec> cells;
  cross_axes(resolved.axes, 0, base, cells);
  const OptimizerSpec default_optimizer;
  for (auto& cell : cells) {
    check(cell);
    // Note [TorchScript num_classes]: unused by this cell (or refused by `check`).
    if (!cell.model.torchscript.empty() && cell.num_classes == 0) cell.num_classes = 1;
    if (cell.mode == Mode::kInfer) {
      cell.optimizer = default_optimizer;  // unused by inference; keeps ids stable
      cell.loss = CellSpec{}.loss;
      // The effective dataset size is explicit in the cell (and so in the results file):
      // unset means one measured pass of full batches on every rank.
      // batch_size auto: the worker sizes each probe's and the final loop's dataset itself.
      // iterations auto: the worker sizes it from max_iterations (Note [Iterations auto]).
      if (cell.samples == 0 && cell.batch_size != kBatchAuto && !iterations_auto(cell)) {
        cell.samples = cell.batch_size * cell.world_size * cell.measured_iterations;
      }
    } else {
      cell.checkpoint.clear();
      cell.samples = 0;
    }
  }
  return cells;
}

/// Cells of one experiment on one branch before excludes, capped at kMaxMatrixCells + 1.
size_t cell_count(const std::vector<Axis>& axes) {
  size_t count = 1;
  for (const auto& axis : axes) {
    count = std::min(count * axis.values.size(), kMaxMatrixCells + 1);
  }
  return count;
}

void check_samples(const CellSpec& cell, const SourceLocation& where, Diagnostics& diagnostics) {
  if (cell.mode != Mode::kInfer || cell.samples == 0 || cell.batch_size == kBatchAuto) return;
  if (cell.samples < cell.batch_size * cell.world_size) {
    diagnostics.error(where, "samples " + std::to_string(cell.samples) +
                                 " is smaller than batch_size x world_size = " +
                                 std::to_string(cell.batch_size * cell.world_size) +
                                 "; every rank needs at least one full batch");
  }
}

}  // namespace

std::vector<CellSpec> expand_matrix(const MatrixRequest& request, const MatrixLimits& limits,
                                    const std::map<std::string, std::string>& commits,
                                    Diagnostics& diagnostics) {
  const std::vector<std::string> branches =
      request.branches.empty() ? std::vector<std::string>{""} : request.branches;
  std::vector<CellSpec> cells;
  std::vector<int> rule_hits(request.excludes.size(), 0);
  std::map<std::string, const CellSpec*> by_id;
  bool has_tree_experiments = false;
  size_t planned_cells = 0;  // before excludes; See Note [Input limits]
  for (const auto& experiment : request.experiments) {
    if (!experiment.tree_name.empty()) {
      has_tree_experiments = true;  // expanded by resolve_matrix
      continue;
    }
    ExperimentResolver resolver(request, experiment, limits, diagnostics);
    const Resolved resolved = resolver.resolve();
    // Rules between settings apply to the cells that will run: an exclude rule is how a
    // sweep leaves out a combination that a rule refuses.
    const auto check = [&resolver, &request](const CellSpec& cell) {
      for (const auto& rule : request.excludes) {
        if (matches(rule, cell)) return;
      }
      resolver.check_cell(cell);
    };
    warn_torchscript_warmup(resolved.base, experiment.where, diagnostics);
    const auto samples_where =
        origin(pick(experiment.settings, request.defaults, "samples"), experiment.where);
    for (const auto& branch : branches) {
      if (experiment.only_branch && *experiment.only_branch != branch) continue;
      planned_cells += cell_count(resolved.axes);
      if (planned_cells > kMaxMatrixCells) {
        diagnostics.error(experiment.where,
                          "the matrix expands to more than " + std::to_string(kMaxMatrixCells) +
                              " cells by this experiment, the limit for a matrix; shorten its "
                              "sweep lists or split the matrix into several files");
        return cells;
      }
      const auto commit = commits.find(branch);
      for (auto& cell : cross(resolved, branch,
                              commit == commits.end() ? std::string() : commit->second, check)) {
        bool excluded = false;
        for (size_t r = 0; r < request.excludes.size(); ++r) {
          if (matches(request.excludes[r], cell)) {
            ++rule_hits[r];
            excluded = true;
          }
        }
        if (excluded) continue;
        check_samples(cell, samples_where, diagnostics);
        // Note [Repetitions]: one cell per run, repetition 0 with the plain cell's id. Auto:
        // max_repetitions runs, the later rounds run only while undecided (Note [Adaptive
        // repetitions] in orchestrator/adaptive_rounds.h).
        if (cell.repetitions == kRepetitionsAuto) {
          cell.repetitions = cell.max_repetitions;
          cell.adaptive_repetitions = true;
        }
        for (int64_t k = 0; k < cell.repetitions; ++k) {
          cell.repetition = k;
          cells.push_back(finalize_cell_id(cell));
        }
        if (cells.size() > kMaxMatrixCells) {
          diagnostics.error(experiment.where,
                            "the matrix expands to more than " + std::to_string(kMaxMatrixCells) +
                                " cells (repetitions count) by this experiment, the limit for a "
                                "matrix; lower repetitions, shorten its sweep lists or split the "
                                "matrix into several files");
          return cells;
        }
      }
    }
  }
  std::set<std::pair<std::string, std::string>> reported;
  for (size_t i = 0; i < cells.size(); ++i) {
    const auto [found, inserted] = by_id.emplace(cells[i].cell_id, &cells[i]);
    if (inserted) continue;
    const auto& first = *found->second;
    if (!reported.emplace(cells[i].source, first.source).second) continue;
    const auto colon = cells[i].source.rfind(':');
    const int line = std::stoi(cells[i].source.substr(colon + 1));
    diagnostics.error({request.file, line, 0, ""},
                      "cell " + cell_label(cells[i]) + " duplicates the same cell from " +
                          first.source + "; remove one of the two entries or exclude one");
  }
  for (size_t r = 0; r < request.excludes.size(); ++r) {
    // A rule may be meant for the cells of a tree experiment, not expanded yet.
    if (rule_hits[r] == 0 && !has_tree_experiments) {
      diagnostics.warning(request.excludes[r].where,
                          "this exclude rule matches no cell; fix its values or remove it");
    }
  }
  return cells;
}

}  // namespace scalebench
