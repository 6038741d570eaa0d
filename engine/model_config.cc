#include "engine/model_config.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/model_config.pb.h"

namespace ndserve::engine {
namespace {

// Collects the parser's messages with 1-based line numbers.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors.push_back(absl::StrFormat("line %d column %d: %s", line + 1, column + 1, message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    warnings.push_back(absl::StrFormat("line %d column %d: %s", line + 1, column + 1, message));
  }
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
};

absl::StatusOr<DType> FromProtoType(inference::DataType type, absl::string_view where) {
  if (type == inference::TYPE_INVALID || !inference::DataType_IsValid(type)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": data_type is missing or invalid"));
  }
  absl::StatusOr<DType> dtype = ParseDType(inference::DataType_Name(type));
  if (!dtype.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", dtype.status().message()));
  return dtype;
}

inference::DataType ToProtoType(DType dtype) {
  if (dtype == DType::kBytes) return inference::TYPE_STRING;
  inference::DataType type = inference::TYPE_INVALID;
  inference::DataType_Parse(absl::StrCat("TYPE_", DTypeName(dtype)), &type);
  return type;
}

template <typename Proto>
absl::StatusOr<TensorSpec> ToSpec(const Proto& t, absl::string_view kind, absl::string_view what) {
  const std::string where = absl::StrCat(what, ": ", kind, " '", ClipName(t.name()), "'");
  if (t.name().empty())
    return absl::InvalidArgumentError(absl::StrCat(what, ": an ", kind, " has no name"));
  if (absl::Status s = CheckName(absl::StrCat(kind, " name"), t.name()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
  }
  TensorSpec spec;
  spec.name = t.name();
  NDS_ASSIGN_OR_RETURN(spec.dtype, FromProtoType(t.data_type(), where));
  for (int64_t d : t.dims()) {
    if (d < kAnyDim) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": dimension ", d, " is invalid (use -1 for a variable size)"));
    }
    spec.dims.push_back(d);
  }
  return spec;
}

// One list of inputs or outputs; a name may appear once.
template <typename Proto>
absl::StatusOr<std::vector<TensorSpec>> ToSpecs(
    const google::protobuf::RepeatedPtrField<Proto>& tensors, absl::string_view kind,
    absl::string_view what) {
  std::vector<TensorSpec> specs;
  absl::flat_hash_set<std::string> names;
  for (const Proto& t : tensors) {
    NDS_ASSIGN_OR_RETURN(TensorSpec spec, ToSpec(t, kind, what));
    if (!names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", kind, " '", spec.name, "' is listed twice"));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// The text format, with unknown fields allowed (Triton configs carry many this server
// ignores; the parser's warnings are logged).
absl::StatusOr<inference::ModelConfig> ParseConfigProto(absl::string_view text,
                                                        absl::string_view what) {
  inference::ModelConfig proto;
  Collector collector;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.AllowUnknownField(true);
  if (!parser.ParseFromString(std::string(text), &proto)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ",
        collector.errors.empty() ? "parse error" : absl::StrJoin(collector.errors, "; ")));
  }
  if (!collector.warnings.empty()) {
    LOG(WARNING) << what << ": ignored: " << absl::StrJoin(collector.warnings, "; ");
  }
  return proto;
}

// Name, platform, backend, model file name and max_batch_size.
absl::Status ReadModelFields(const inference::ModelConfig& proto, absl::string_view what,
                             ModelConfig* config) {
  config->name = proto.name();
  config->platform = proto.platform();
  config->backend = proto.backend();
  config->default_model_filename = proto.default_model_filename();
  if (!config->platform.empty() && config->platform != "onnxruntime_onnx" &&
      config->platform != "onnx") {
    return absl::InvalidArgumentError(absl::StrCat(what, ": platform '", config->platform,
                                                   "' is not supported (only onnxruntime_onnx)"));
  }
  if (!config->backend.empty() && config->backend != "onnxruntime" &&
      config->backend != "ndserve") {
    return absl::InvalidArgumentError(absl::StrCat(what, ": backend '", config->backend,
                                                   "' is not supported (only onnxruntime)"));
  }
  if (config->default_model_filename.find('/') != std::string::npos ||
      config->default_model_filename == "." || config->default_model_filename == "..") {
    return absl::InvalidArgumentError(absl::StrCat(what, ": default_model_filename '",
                                                   config->default_model_filename,
                                                   "' must be a plain file name"));
  }
  if (proto.max_batch_size() < 0 || proto.max_batch_size() > kMaxBatchSizeLimit) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": max_batch_size must be from 0 to ",
                                                   kMaxBatchSizeLimit, ", not ",
                                                   proto.max_batch_size()));
  }
  config->max_batch_size = proto.max_batch_size();
  return absl::OkStatus();
}

absl::StatusOr<InstanceGroupConfig> ToInstanceGroup(const inference::ModelInstanceGroup& g,
                                                    absl::string_view what) {
  InstanceGroupConfig group;
  group.name = g.name();
  if (g.count() < 0 || g.count() > kMaxInstanceCount) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": instance_group count must be from 0 to ", kMaxInstanceCount, ", not ", g.count()));
  }
  for (int gpu : g.gpus()) {
    if (gpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": instance_group gpus must be >= 0, not ", gpu));
    }
  }
  // Triton's default count is 1 when the field is absent (0 in proto3).
  group.count = g.count() == 0 ? 1 : g.count();
  group.gpus.assign(g.gpus().begin(), g.gpus().end());
  switch (g.kind()) {
    case inference::ModelInstanceGroup::KIND_GPU:
      group.kind = InstanceGroupConfig::Kind::kGpu;
      break;
    case inference::ModelInstanceGroup::KIND_CPU:
      group.kind = InstanceGroupConfig::Kind::kCpu;
      break;
    case inference::ModelInstanceGroup::KIND_MODEL:
      group.kind = InstanceGroupConfig::Kind::kModel;
      break;
    default:
      group.kind = InstanceGroupConfig::Kind::kAuto;
      break;
  }
  return group;
}

QueuePolicyConfig ToQueuePolicy(const inference::ModelQueuePolicy& qp) {
  QueuePolicyConfig policy;
  policy.timeout_action = qp.timeout_action() == inference::ModelQueuePolicy::DELAY
                              ? QueuePolicyConfig::TimeoutAction::kDelay
                              : QueuePolicyConfig::TimeoutAction::kReject;
  policy.default_timeout_microseconds = qp.default_timeout_microseconds();
  policy.allow_timeout_override = qp.allow_timeout_override();
  policy.max_queue_size = qp.max_queue_size();
  return policy;
}

void FromQueuePolicy(const QueuePolicyConfig& policy, inference::ModelQueuePolicy* qp) {
  qp->set_timeout_action(policy.timeout_action == QueuePolicyConfig::TimeoutAction::kDelay
                             ? inference::ModelQueuePolicy::DELAY
                             : inference::ModelQueuePolicy::REJECT);
  qp->set_default_timeout_microseconds(policy.default_timeout_microseconds);
  qp->set_allow_timeout_override(policy.allow_timeout_override);
  qp->set_max_queue_size(policy.max_queue_size);
}

// Triton's priority fields, range-checked as Triton does: with levels, the default level
// and every level that has a policy lie in 1..priority_levels.
absl::Status ToPriorities(const inference::ModelDynamicBatching& proto, DynamicBatchingConfig* db,
                          absl::string_view what) {
  const uint64_t levels = proto.priority_levels();
  if (levels > kMaxPriorityLevels) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": dynamic_batching priority_levels must ",
                                                   "be at most ", kMaxPriorityLevels, ", not ",
                                                   levels));
  }
  if (levels == 0) {
    if (proto.default_priority_level() != 0 || !proto.priority_queue_policy().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dynamic_batching default_priority_level and priority_queue_policy need ",
          "priority_levels"));
    }
    return absl::OkStatus();
  }
  if (proto.default_priority_level() < 1 || proto.default_priority_level() > levels) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dynamic_batching default_priority_level must be from 1 to priority_levels (",
        levels, "), not ", proto.default_priority_level()));
  }
  db->priority_levels = levels;
  db->default_priority_level = proto.default_priority_level();
  for (const auto& [level, qp] : proto.priority_queue_policy()) {
    if (level < 1 || level > levels) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": dynamic_batching priority_queue_policy level must be from 1 to ",
          "priority_levels (", levels, "), not ", level));
    }
    db->priority_queue_policy[level] = ToQueuePolicy(qp);
  }
  return absl::OkStatus();
}

absl::StatusOr<DynamicBatchingConfig> ToDynamicBatching(
    const inference::ModelDynamicBatching& proto, int max_batch_size, absl::string_view what) {
  DynamicBatchingConfig db;
  for (int size : proto.preferred_batch_size()) {
    // As Triton: a preferred size the batcher can never form is a config error.
    if (size < 1 || size > max_batch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dynamic_batching preferred_batch_size must be from 1 to ",
                       "max_batch_size (", max_batch_size, "), not ", size));
    }
    db.preferred_batch_sizes.push_back(size);
  }
  // The field is unsigned 64-bit; absl::Microseconds takes int64, so 2^64-1 would wrap
  // to a negative (read as no delay) without this check.
  if (proto.max_queue_delay_microseconds() > kMaxQueueDelayMicroseconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dynamic_batching max_queue_delay_microseconds must be at most ",
        kMaxQueueDelayMicroseconds, " (one hour), not ", proto.max_queue_delay_microseconds()));
  }
  db.max_queue_delay_microseconds = proto.max_queue_delay_microseconds();
  db.preserve_ordering = proto.preserve_ordering();
  db.default_queue_policy = ToQueuePolicy(proto.default_queue_policy());
  NDS_RETURN_IF_ERROR(ToPriorities(proto, &db, what));
  return db;
}

// Triton's default policy is the latest version only.
absl::StatusOr<VersionPolicy> ToVersionPolicy(const inference::ModelVersionPolicy& vp,
                                              absl::string_view what) {
  VersionPolicy policy;
  if (vp.has_all()) {
    policy.kind = VersionPolicy::Kind::kAll;
  } else if (vp.has_specific()) {
    policy.kind = VersionPolicy::Kind::kSpecific;
    policy.versions.assign(vp.specific().versions().begin(), vp.specific().versions().end());
    if (policy.versions.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": version_policy specific lists no versions"));
    }
  } else {
    policy.kind = VersionPolicy::Kind::kLatest;
    policy.num_versions =
        vp.has_latest() && vp.latest().num_versions() > 0 ? vp.latest().num_versions() : 1;
  }
  return policy;
}

constexpr absl::string_view kCudaGraphsParameter = "cuda_graphs";
constexpr absl::string_view kTf32Parameter = "tf32";
constexpr absl::string_view kCublasLtParameter = "cublaslt";
constexpr absl::string_view kPadBatchesParameter = "pad_batches";

// A free-form parameter that is a switch: true or false, in any case.
absl::StatusOr<bool> ParseBoolParameter(absl::string_view key, absl::string_view value,
                                        absl::string_view what) {
  const std::string lower = absl::AsciiStrToLower(value);
  if (lower == "true") return true;
  if (lower == "false") return false;
  return absl::InvalidArgumentError(absl::StrCat(what, ": parameter '", key,
                                                 "' must be \"true\" or \"false\", not \"",
                                                 SafeUtf8(value), "\""));
}

}  // namespace

int ModelConfig::InstanceCount() const {
  // Summed wide: counts are each below 2^31 but their sum need not be (signed overflow
  // is undefined); the total saturates so a load can refuse it as too many.
  int64_t total = 0;
  for (const InstanceGroupConfig& g : instance_groups) total += g.count;
  if (total > INT32_MAX) return INT32_MAX;
  return total > 0 ? static_cast<int>(total) : 1;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text, absl::string_view what) {
  NDS_ASSIGN_OR_RETURN(const inference::ModelConfig proto, ParseConfigProto(text, what));
  ModelConfig config;
  NDS_RETURN_IF_ERROR(ReadModelFields(proto, what, &config));
  NDS_ASSIGN_OR_RETURN(config.inputs, ToSpecs(proto.input(), "input", what));
  NDS_ASSIGN_OR_RETURN(config.outputs, ToSpecs(proto.output(), "output", what));
  int64_t instances = 0;
  for (const inference::ModelInstanceGroup& g : proto.instance_group()) {
    NDS_ASSIGN_OR_RETURN(InstanceGroupConfig group, ToInstanceGroup(g, what));
    // Summed in 64 bits: two groups near INT_MAX must not wrap to a small total.
    instances += group.count;
    if (instances > kMaxInstanceCount) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the instance_group counts add up to more than ", kMaxInstanceCount));
    }
    config.instance_groups.push_back(std::move(group));
  }
  if (proto.has_dynamic_batching()) {
    NDS_ASSIGN_OR_RETURN(config.dynamic_batching,
                         ToDynamicBatching(proto.dynamic_batching(), config.max_batch_size, what));
  }
  NDS_ASSIGN_OR_RETURN(config.version_policy, ToVersionPolicy(proto.version_policy(), what));
  if (auto it = proto.parameters().find(std::string(kCudaGraphsParameter));
      it != proto.parameters().end()) {
    NDS_ASSIGN_OR_RETURN(config.cuda_graphs,
                         ParseBoolParameter(kCudaGraphsParameter, it->second.string_value(), what));
  }
  if (auto it = proto.parameters().find(std::string(kTf32Parameter));
      it != proto.parameters().end()) {
    NDS_ASSIGN_OR_RETURN(config.tf32,
                         ParseBoolParameter(kTf32Parameter, it->second.string_value(), what));
  }
  if (auto it = proto.parameters().find(std::string(kCublasLtParameter));
      it != proto.parameters().end()) {
    NDS_ASSIGN_OR_RETURN(config.cublaslt,
                         ParseBoolParameter(kCublasLtParameter, it->second.string_value(), what));
  }
  if (auto it = proto.parameters().find(std::string(kPadBatchesParameter));
      it != proto.parameters().end()) {
    NDS_ASSIGN_OR_RETURN(
        config.pad_batches,
        ParseBoolParameter(kPadBatchesParameter, it->second.string_value(), what));
  }
  return config;
}

absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::FailedPreconditionError(absl::StrCat(path, ": read error"));
  return ParseModelConfig(buffer.str(), path);
}

std::string ModelConfigToText(const ModelConfig& config) {
  inference::ModelConfig proto;
  proto.set_name(config.name);
  proto.set_platform(config.platform.empty() ? "onnxruntime_onnx" : config.platform);
  proto.set_backend(config.backend);
  proto.set_default_model_filename(config.default_model_filename);
  proto.set_max_batch_size(config.max_batch_size);
  for (const TensorSpec& spec : config.inputs) {
    inference::ModelInput* in = proto.add_input();
    in->set_name(spec.name);
    in->set_data_type(ToProtoType(spec.dtype));
    for (int64_t d : spec.dims) in->add_dims(d);
  }
  for (const TensorSpec& spec : config.outputs) {
    inference::ModelOutput* out = proto.add_output();
    out->set_name(spec.name);
    out->set_data_type(ToProtoType(spec.dtype));
    for (int64_t d : spec.dims) out->add_dims(d);
  }
  for (const InstanceGroupConfig& g : config.instance_groups) {
    inference::ModelInstanceGroup* group = proto.add_instance_group();
    group->set_name(g.name);
    group->set_count(g.count);
    for (int gpu : g.gpus) group->add_gpus(gpu);
    switch (g.kind) {
      case InstanceGroupConfig::Kind::kGpu:
        group->set_kind(inference::ModelInstanceGroup::KIND_GPU);
        break;
      case InstanceGroupConfig::Kind::kCpu:
        group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
        break;
      case InstanceGroupConfig::Kind::kModel:
        group->set_kind(inference::ModelInstanceGroup::KIND_MODEL);
        break;
      case InstanceGroupConfig::Kind::kAuto:
        group->set_kind(inference::ModelInstanceGroup::KIND_AUTO);
        break;
    }
  }
  if (config.dynamic_batching.has_value()) {
    inference::ModelDynamicBatching* db = proto.mutable_dynamic_batching();
    for (int size : config.dynamic_batching->preferred_batch_sizes) {
      db->add_preferred_batch_size(size);
    }
    db->set_max_queue_delay_microseconds(config.dynamic_batching->max_queue_delay_microseconds);
    db->set_preserve_ordering(config.dynamic_batching->preserve_ordering);
    const QueuePolicyConfig& policy = config.dynamic_batching->default_queue_policy;
    if (policy != QueuePolicyConfig{}) FromQueuePolicy(policy, db->mutable_default_queue_policy());
    db->set_priority_levels(config.dynamic_batching->priority_levels);
    db->set_default_priority_level(config.dynamic_batching->default_priority_level);
    for (const auto& [level, level_policy] : config.dynamic_batching->priority_queue_policy) {
      FromQueuePolicy(level_policy, &(*db->mutable_priority_queue_policy())[level]);
    }
  }
  switch (config.version_policy.kind) {
    case VersionPolicy::Kind::kAll:
      proto.mutable_version_policy()->mutable_all();
      break;
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : config.version_policy.versions) {
        proto.mutable_version_policy()->mutable_specific()->add_versions(v);
      }
      break;
    case VersionPolicy::Kind::kLatest:
      proto.mutable_version_policy()->mutable_latest()->set_num_versions(
          config.version_policy.num_versions);
      break;
  }
  if (!config.cuda_graphs) {
    (*proto.mutable_parameters())[std::string(kCudaGraphsParameter)].set_string_value("false");
  }
  if (config.tf32) {
    (*proto.mutable_parameters())[std::string(kTf32Parameter)].set_string_value("true");
  }
  if (!config.cublaslt) {
    (*proto.mutable_parameters())[std::string(kCublasLtParameter)].set_string_value("false");
  }
  if (config.pad_batches.has_value()) {
    (*proto.mutable_parameters())[std::string(kPadBatchesParameter)].set_string_value(
        *config.pad_batches ? "true" : "false");
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(proto, &text);
  return text;
}

}  // namespace ndserve::engine
