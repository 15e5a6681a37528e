// Expansion of a MatrixRequest into cells, with the semantic checks. See matrix_request.h.
#include <algorithm>
#include <map>
#include <set>

#include "common/matrix_request.h"
#include "common/zoo_names.h"

namespace scalebench {
namespace {

/// The experiment's value if set, else the matrix default's, else none.
template <typename T>
const Setting<T>& pick(const Setting<T>& own, const Setting<T>& fallback) {
  return own.value ? own : fallback;
}

/// Where a resolved value came from: its own position, or the experiment's entry.
template <typename T>
SourceLocation origin(const Setting<T>& setting, const SourceLocation& experiment) {
  return setting.value && setting.where.line > 0 ? setting.where : experiment;
}

/// Resolved settings of one experiment (axes + the scalar cell fields).
struct Resolved {
  std::vector<int64_t> batch_sizes;
  std::vector<int64_t> world_sizes;
  std::vector<Precision> precisions;
  std::vector<Mode> modes;
  CellSpec base;  ///< every field but the axes and the branch
};

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
    resolve_axes(out);
    resolve_model(out.base);
    resolve_run_settings(out.base);
    resolve_optimizer(out.base);
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

  template <typename T>
  const Setting<T>& get(Setting<T> SettingsRequest::*member) const {
    return pick(experiment_.settings.*member, defaults_.*member);
  }

  void resolve_axes(Resolved& out) {
    const CellSpec defaults;
    const auto& batches = get(&SettingsRequest::batch_sizes);
    if (!batches.value) {
      error(experiment_.where,
            "no batch sizes; add sweep.batch_sizes or batch_sizes to the experiment");
    } else {
      for (const int64_t batch : *batches.value) {
        if (batch > kMaxBatchSize) {
          error(origin(batches, experiment_.where),
                "batch size " + std::to_string(batch) + " is absurd (above " +
                    std::to_string(kMaxBatchSize) + " = 1<<20); use a smaller batch size");
        }
      }
      out.batch_sizes = *batches.value;
    }
    const auto& worlds = get(&SettingsRequest::world_sizes);
    out.world_sizes = worlds.value.value_or(std::vector<int64_t>{defaults.world_size});
    for (const int64_t world : out.world_sizes) {
      if (world > limits_.max_world_size) {
        error(origin(worlds, experiment_.where),
              "world size " + std::to_string(world) + " is above the limit of " +
                  std::to_string(limits_.max_world_size) +
                  " workers; use a smaller world size or raise --max-world-size");
      }
    }
    out.precisions = get(&SettingsRequest::precisions)
                         .value.value_or(std::vector<Precision>{defaults.precision});
    out.modes = get(&SettingsRequest::modes).value.value_or(std::vector<Mode>{defaults.mode});
  }

  void resolve_model(CellSpec& cell) {
    cell.model = experiment_.model;
    const auto& shape = experiment_.input_shape;
    const auto& classes = experiment_.num_classes;
    cell.input_shape = shape.value.value_or(std::vector<int64_t>{});
    cell.num_classes = classes.value.value_or(0);
    if (!cell.model.torchscript.empty()) {
      if (cell.input_shape.empty()) {
        error(origin(shape, experiment_.where),
              "a TorchScript model has no default input shape; set input_shape");
      }
      if (cell.num_classes == 0) {
        error(origin(classes, experiment_.where),
              "a TorchScript model has no default num_classes; set num_classes");
      }
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

  void resolve_run_settings(CellSpec& cell) {
    const auto& warmup = get(&SettingsRequest::warmup);
    const auto& iterations = get(&SettingsRequest::iterations);
    const auto& timeout = get(&SettingsRequest::timeout_s);
    const auto& bucket = get(&SettingsRequest::bucket_bytes);
    const auto& first_bucket = get(&SettingsRequest::first_bucket_bytes);
    const auto& device = get(&SettingsRequest::device);
    const auto& backend = get(&SettingsRequest::backend);
    if (warmup.value)
      cell.warmup_iterations = static_cast<int>(std::min(*warmup.value, kMaxIterations + 1));
    if (iterations.value)
      cell.measured_iterations = static_cast<int>(std::min(*iterations.value, kMaxIterations + 1));
    if (const auto& seed = get(&SettingsRequest::seed); seed.value)
      cell.seed = static_cast<uint64_t>(*seed.value);
    if (timeout.value) cell.timeout_s = *timeout.value;
    if (device.value) cell.device = *device.value;
    if (backend.value) cell.backend = *backend.value;
    if (bucket.value) cell.bucket_bytes = *bucket.value;
    if (first_bucket.value) cell.first_bucket_bytes = *first_bucket.value;
    if (const auto& v = get(&SettingsRequest::channels_last); v.value)
      cell.channels_last = *v.value;
    if (const auto& v = get(&SettingsRequest::tf32); v.value) cell.tf32 = *v.value;
    if (const auto& v = get(&SettingsRequest::samples); v.value) cell.samples = *v.value;
    const auto& where = experiment_.where;
    if (cell.warmup_iterations > kMaxIterations) {
      error(origin(warmup, where), "warmup is absurd (above 1000000); use fewer iterations");
    }
    if (cell.measured_iterations > kMaxIterations) {
      error(origin(iterations, where),
            "iterations is absurd (above 1000000); use fewer iterations");
    }
    if (!(cell.timeout_s > 0)) {
      error(origin(timeout, where), "timeout_s must be > 0 seconds; use e.g. 600");
    }
    for (const auto* setting : {&bucket, &first_bucket}) {
      if (setting->value && *setting->value > kMaxBucketBytes) {
        error(origin(*setting, where),
              "bucket size is absurd (above 64 GiB); use e.g. 26214400 (25 MiB)");
      }
    }
    if (cell.backend == Backend::kNccl && cell.device == Device::kCpu) {
      error(origin(backend, where),
            "backend nccl needs device cuda (or auto); use backend mpi or auto for CPU cells");
    }
  }

  void resolve_optimizer(CellSpec& cell) {
    const auto& name = get(&SettingsRequest::optimizer_name);
    const auto& lr = get(&SettingsRequest::lr);
    const auto& momentum = get(&SettingsRequest::momentum);
    if (name.value) cell.optimizer.name = *name.value;
    if (lr.value) cell.optimizer.lr = *lr.value;
    if (momentum.value) cell.optimizer.momentum = *momentum.value;
    if (const auto& v = get(&SettingsRequest::weight_decay); v.value)
      cell.optimizer.weight_decay = *v.value;
    const auto& where = experiment_.where;
    if (cell.optimizer.name != "sgd" && cell.optimizer.name != "adam" &&
        cell.optimizer.name != "adamw") {
      error(origin(name, where),
            "unknown optimizer '" + cell.optimizer.name + "'; use sgd, adam or adamw");
    }
    if (!(cell.optimizer.lr > 0) || cell.optimizer.lr > 10) {
      error(origin(lr, where), "lr must be > 0 and <= 10; use e.g. 0.01");
    }
    if (cell.optimizer.momentum >= 1) {
      error(origin(momentum, where), "momentum must be in [0, 1); use e.g. 0.9");
    }
    if (cell.optimizer.momentum != 0 && cell.optimizer.name != "sgd") {
      error(origin(momentum, where),
            "momentum applies only to sgd; remove it or use optimizer sgd");
    }
  }

  const SettingsRequest& defaults_;
  const ExperimentRequest& experiment_;
  const MatrixLimits& limits_;
  Diagnostics& diagnostics_;
};

bool matches(const ExcludeRule& rule, const CellSpec& cell) {
  return (!rule.experiment || *rule.experiment == cell.experiment) &&
         (!rule.branch || *rule.branch == cell.branch) && (!rule.mode || *rule.mode == cell.mode) &&
         (!rule.batch_size || *rule.batch_size == cell.batch_size) &&
         (!rule.world_size || *rule.world_size == cell.world_size) &&
         (!rule.precision || *rule.precision == cell.precision);
}

/// TorchScript's profiling graph executor profiles the first calls of a module and compiles
/// an optimised graph on about the third (measured: 20 ms instead of 0.7 ms for a small MLP's
/// training step, docs/own-model.md); warm-up iterations below that put it in the figures.
inline constexpr int kTorchScriptWarmup = 3;

void warn_torchscript_warmup(const CellSpec& base, const SourceLocation& where,
                             Diagnostics& diagnostics) {
  if (base.model.torchscript.empty() || base.warmup_iterations >= kTorchScriptWarmup) return;
  diagnostics.warning(where,
                      "TorchScript model with warmup " + std::to_string(base.warmup_iterations) +
                          ": the TorchScript executor optimises the graph during its first " +
                          std::to_string(kTorchScriptWarmup) +
                          " calls, which would land in the measured iterations; set warmup: " +
                          std::to_string(kTorchScriptWarmup) + " or more");
}

/// Cells of one experiment on one branch, before excludes.
std::vector<CellSpec> cross(const Resolved& resolved, const std::string& branch) {
  std::vector<CellSpec> cells;
  const OptimizerSpec default_optimizer;
  for (const Mode mode : resolved.modes) {
    for (const int64_t batch : resolved.batch_sizes) {
      for (const int64_t world : resolved.world_sizes) {
        for (const Precision precision : resolved.precisions) {
          CellSpec cell = resolved.base;
          cell.branch = branch;
          cell.mode = mode;
          cell.batch_size = batch;
          cell.world_size = static_cast<int>(world);
          cell.precision = precision;
          if (mode == Mode::kInfer) {
            cell.optimizer = default_optimizer;  // unused by inference; keeps ids stable
            // The effective dataset size is explicit in the cell (and so in the results file):
            // unset means one measured pass of full batches on every rank.
            if (cell.samples == 0) {
              cell.samples = batch * world * cell.measured_iterations;
            }
          } else {
            cell.checkpoint.clear();
            cell.samples = 0;
          }
          cells.push_back(cell);
        }
      }
    }
  }
  return cells;
}

void check_samples(const CellSpec& cell, const SourceLocation& where, Diagnostics& diagnostics) {
  if (cell.mode != Mode::kInfer || cell.samples == 0) return;
  if (cell.samples < cell.batch_size * cell.world_size) {
    diagnostics.error(where, "samples " + std::to_string(cell.samples) +
                                 " is smaller than batch_size x world_size = " +
                                 std::to_string(cell.batch_size * cell.world_size) +
                                 "; every rank needs at least one full batch");
  }
}

}  // namespace

std::vector<CellSpec> expand_matrix(const MatrixRequest& request, const MatrixLimits& limits,
                                    Diagnostics& diagnostics) {
  const std::vector<std::string> branches =
      request.branches.empty() ? std::vector<std::string>{""} : request.branches;
  std::vector<CellSpec> cells;
  std::vector<int> rule_hits(request.excludes.size(), 0);
  std::map<std::string, const CellSpec*> by_id;
  bool has_tree_experiments = false;
  for (const auto& experiment : request.experiments) {
    if (!experiment.tree_name.empty()) {
      has_tree_experiments = true;  // expanded by resolve_tree_experiments
      continue;
    }
    const Resolved resolved =
        ExperimentResolver(request, experiment, limits, diagnostics).resolve();
    warn_torchscript_warmup(resolved.base, experiment.where, diagnostics);
    const auto samples_where =
        origin(pick(experiment.settings.samples, request.defaults.samples), experiment.where);
    for (const auto& branch : branches) {
      if (experiment.only_branch && *experiment.only_branch != branch) continue;
      for (auto& cell : cross(resolved, branch)) {
        bool excluded = false;
        for (size_t r = 0; r < request.excludes.size(); ++r) {
          if (matches(request.excludes[r], cell)) {
            ++rule_hits[r];
            excluded = true;
          }
        }
        if (excluded) continue;
        check_samples(cell, samples_where, diagnostics);
        cells.push_back(finalize_cell_id(std::move(cell)));
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
