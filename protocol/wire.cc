#include "protocol/wire.h"

#include <cstring>
#include <utility>

#include "common/base/error.h"

namespace scalebench {
namespace {

nlohmann::json parse_msgpack(const std::vector<uint8_t>& bytes, const char* what) {
  try {
    return nlohmann::json::from_msgpack(bytes);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("malformed ") + what + " message: " + e.what());
  }
}

template <typename Fn>
auto decode(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(std::string("malformed ") + what + " message: " + e.what());
  }
}

}  // namespace

std::vector<uint8_t> serialize(const WorkerHello& hello) {
  const nlohmann::json json{{"world_rank", hello.world_rank},   {"host", hello.host},
                            {"local_index", hello.local_index}, {"device", hello.device},
                            {"cpu_model", hello.cpu_model},     {"node_cores", hello.node_cores}};
  return nlohmann::json::to_msgpack(json);
}

std::vector<uint8_t> serialize(const Assignment& assignment) {
  const nlohmann::json json{
      {"cell", to_json(assignment.cell)},
      {"members", assignment.members},
      {"artifact", nlohmann::json::binary(std::vector<uint8_t>(assignment.artifact.begin(),
                                                               assignment.artifact.end()))},
      {"tree", assignment.tree}};
  return nlohmann::json::to_msgpack(json);
}

std::vector<uint8_t> serialize(const RankResult& result) {
  nlohmann::json json{{"cell_id", result.cell_id},
                      {"group_rank", result.group_rank},
                      {"world_rank", result.world_rank},
                      {"host", result.host},
                      {"device", result.device},
                      {"status", to_string(result.status)},
                      {"failed_phase", to_string(result.failed_phase)},
                      {"fatal", result.fatal},
                      {"reason", result.reason},
                      {"phases", result.phases},
                      {"warmup_iterations", result.warmup_iterations},
                      {"stop_reason", result.stop_reason},
                      {"warmup_reason", result.warmup_reason},
                      {"timings_s", result.timings_s},
                      {"phase_starts_s", result.phase_starts_s},
                      {"bucket_times_s", result.bucket_times_s},
                      {"bucket_bytes", result.bucket_bytes},
                      {"metrics", result.metrics},
                      {"effective", result.effective},
                      {"ineffective_reasons", result.ineffective_reasons},
                      {"untrusted_reasons", result.untrusted_reasons}};
  if (const auto& accuracy = result.accuracy) {
    json["accuracy"] = {{"kind", accuracy->kind},
                        {"verdict", accuracy->verdict},
                        {"failed_checks", accuracy->failed_checks},
                        {"reference", accuracy->reference},
                        {"values", accuracy->values}};
  }
  if (!result.probes.empty()) {
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : result.probes) {
      probes.push_back({p.batch, static_cast<int>(p.status), p.median_s, p.p99_s, p.throughput,
                        p.peak_memory_bytes, p.times_s});
    }
    json["probes"] = std::move(probes);
  }
  if (result.program) {
    json["program"] = {{"argv", result.program->argv},
                       {"output_tail", result.program->output_tail}};
  }
  if (result.profile) json["profile"] = to_json(*result.profile);  // Note [Operator profiles]
  if (result.validation_outputs) {  // float32 bytes as a msgpack bin, not numbers in text
    const auto& values = result.validation_outputs->values;
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    json["validation_outputs"] = {{"shape", result.validation_outputs->shape},
                                  {"float32", nlohmann::json::binary(std::vector<uint8_t>(
                                                  bytes, bytes + values.size() * sizeof(float)))}};
  }
  return nlohmann::json::to_msgpack(json);
}

std::vector<uint8_t> serialize(const CellProgress& progress) {
  const nlohmann::json json{{"cell_id", progress.cell_id},
                            {"stage", progress.stage},
                            {"done", progress.done},
                            {"total", progress.total}};
  return nlohmann::json::to_msgpack(json);
}

CellProgress deserialize_progress(const std::vector<uint8_t>& bytes) {
  const auto json = parse_msgpack(bytes, "progress");
  return decode("progress", [&] {
    CellProgress progress;
    progress.cell_id = json.at("cell_id").get<std::string>();
    progress.stage = json.at("stage").get<std::string>();
    progress.done = json.at("done").get<int64_t>();
    progress.total = json.at("total").get<int64_t>();
    return progress;
  });
}

WorkerHello deserialize_hello(const std::vector<uint8_t>& bytes) {
  const auto json = parse_msgpack(bytes, "hello");
  return decode("hello", [&] {
    WorkerHello hello;
    hello.world_rank = json.at("world_rank").get<int>();
    hello.host = json.at("host").get<std::string>();
    hello.local_index = json.at("local_index").get<int>();
    hello.device = json.at("device").get<std::string>();
    hello.cpu_model = json.at("cpu_model").get<std::string>();
    hello.node_cores = json.at("node_cores").get<int>();
    return hello;
  });
}

Assignment deserialize_assignment(const std::vector<uint8_t>& bytes) {
  const auto json = parse_msgpack(bytes, "assignment");
  return decode("assignment", [&] {
    Assignment assignment;
    assignment.cell = cell_spec_from_json(json.at("cell"));
    assignment.members = json.at("members").get<std::vector<int>>();
    const auto& artifact = json.at("artifact").get_binary();
    assignment.artifact.assign(artifact.begin(), artifact.end());
    assignment.tree = json.at("tree").get<std::string>();
    return assignment;
  });
}

RankResult deserialize_result(const std::vector<uint8_t>& bytes) {
  const auto json = parse_msgpack(bytes, "result");
  return decode("result", [&] {
    RankResult result;
    result.cell_id = json.at("cell_id").get<std::string>();
    result.group_rank = json.at("group_rank").get<int>();
    result.world_rank = json.at("world_rank").get<int>();
    result.host = json.at("host").get<std::string>();
    result.device = json.at("device").get<std::string>();
    const auto status_text = json.at("status").get<std::string>();
    const auto status = parse_cell_status(status_text);
    if (!status) throw InputError("malformed result message: unknown status '" + status_text + "'");
    result.status = *status;
    const auto phase_text = json.at("failed_phase").get<std::string>();
    const auto phase = parse_failure_phase(phase_text);
    if (!phase) {
      throw InputError("malformed result message: unknown failed_phase '" + phase_text + "'");
    }
    result.failed_phase = *phase;
    result.fatal = json.at("fatal").get<bool>();
    result.reason = json.at("reason").get<std::string>();
    result.phases = json.at("phases").get<std::vector<std::string>>();
    result.warmup_iterations = json.at("warmup_iterations").get<int>();
    result.stop_reason = json.at("stop_reason").get<std::string>();
    result.warmup_reason = json.at("warmup_reason").get<std::string>();
    result.timings_s = json.at("timings_s").get<std::vector<double>>();
    result.phase_starts_s = json.at("phase_starts_s").get<std::vector<double>>();
    result.bucket_times_s = json.at("bucket_times_s").get<std::vector<double>>();
    result.bucket_bytes = json.at("bucket_bytes").get<std::vector<int64_t>>();
    result.metrics = json.at("metrics").get<std::map<std::string, double>>();
    result.effective = json.at("effective").get<std::map<std::string, std::string>>();
    result.ineffective_reasons = json.at("ineffective_reasons").get<std::vector<std::string>>();
    result.untrusted_reasons = json.at("untrusted_reasons").get<std::vector<std::string>>();
    if (const auto found = json.find("accuracy"); found != json.end()) {
      AccuracyReport accuracy;
      accuracy.kind = found->at("kind").get<std::string>();
      accuracy.verdict = found->at("verdict").get<std::string>();
      accuracy.failed_checks = found->at("failed_checks").get<std::vector<std::string>>();
      accuracy.reference = found->at("reference").get<std::string>();
      accuracy.values = found->at("values").get<std::map<std::string, double>>();
      result.accuracy = std::move(accuracy);
    }
    if (const auto found = json.find("probes"); found != json.end()) {
      for (const auto& row : *found) {
        BatchProbe probe;
        probe.batch = row.at(0).get<int64_t>();
        const int status = row.at(1).get<int>();
        if (status < 0 || status > static_cast<int>(ProbeStatus::kOverBudget)) {
          throw InputError("malformed result message: probe status " + std::to_string(status));
        }
        probe.status = static_cast<ProbeStatus>(status);
        probe.median_s = row.at(2).get<double>();
        probe.p99_s = row.at(3).get<double>();
        probe.throughput = row.at(4).get<double>();
        probe.peak_memory_bytes = row.at(5).get<double>();
        probe.times_s = row.at(6).get<std::vector<double>>();
        result.probes.push_back(probe);
      }
    }
    if (const auto found = json.find("program"); found != json.end()) {
      result.program = ProgramInvocation{found->at("argv").get<std::vector<std::string>>(),
                                         found->at("output_tail").get<std::string>()};
    }
    if (const auto found = json.find("profile"); found != json.end()) {
      result.profile = op_profile_from_json(*found);
    }
    if (const auto found = json.find("validation_outputs"); found != json.end()) {
      OutputArray outputs;
      outputs.shape = found->at("shape").get<std::vector<int64_t>>();
      const auto& bytes = found->at("float32").get_binary();
      if (bytes.size() != static_cast<size_t>(outputs.element_count()) * sizeof(float)) {
        throw InputError("malformed result message: validation outputs of shape " +
                         shape_text(outputs.shape) + " hold " + std::to_string(bytes.size()) +
                         " bytes");
      }
      outputs.values.resize(bytes.size() / sizeof(float));
      std::memcpy(outputs.values.data(), bytes.data(), bytes.size());
      result.validation_outputs = std::move(outputs);
    }
    return result;
  });
}

}  // namespace scalebench
