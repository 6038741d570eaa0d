// ndserve-cli: a small operator client for a running ndserved.
//
//   ndserve-cli status [--outstanding] [--device_id=N]   memory status of the pools
//   ndserve-cli reclaim [--target=512MiB] [--device_id=N] give cached memory back
//     (status, reclaim and memory-map take --device=cuda_host:0 for one device's pool)
//   ndserve-cli dump [--depth=N]                         the NDManager tree
//   ndserve-cli memory-map [--out=F] [--device_id=N]     the /memory page, offline
//   ndserve-cli health                                   liveness and readiness
//   ndserve-cli metadata --model=NAME                    a model's inputs and outputs
//   ndserve-cli infer --model=NAME INPUT...              one ModelInfer request
//   ndserve-cli train start|step|commit|abort|list       fine-tuning (server/cli_train.cc)
//
// --http=HOST:PORT sends health, metadata and infer over KServe v2 HTTP/REST instead of
// gRPC (--server).
//
// An INPUT is NAME:DATATYPE:SHAPE:DATA, e.g. `x:FP32:1x4:1,2,3,4`, `ids:INT64:2:7,9`,
// `img:FP16:1x3x8x8:zeros` or `blob:UINT8:1024:@file.bin`. DATA is comma-separated
// values, `zeros`, or `@path` (raw little-endian bytes; for BYTES, values are strings).
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "memory/memory_config.h"
#include "memory/pool_stats.h"
#include "proto/admin.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/inference.grpc.pb.h"
#include "protocol/datatype.h"
#include "protocol/dims.h"
#include "server/cli_http.h"
#include "server/cli_train.h"
#include "server/memory_map_page.h"
#include "server/options.h"
#include "server/status_util.h"

ABSL_FLAG(std::string, server, "127.0.0.1:8001", "Inference (and health) address of ndserved.");
ABSL_FLAG(std::string, admin, "127.0.0.1:8003", "Admin address of ndserved.");
ABSL_FLAG(std::string, token_file, "",
          "File with the admin bearer token, if the daemon needs one.");
ABSL_FLAG(int, device_id, -1, "status/reclaim/memory-map: device ordinal, -1 for every device.");
ABSL_FLAG(std::string, device, "",
          "status/reclaim/memory-map: one device by label (cpu:0, cuda:1, cuda_host:0); "
          "overrides --device_id.");
ABSL_FLAG(bool, outstanding, false, "status: also list live allocations.");
ABSL_FLAG(std::string, target, "",
          "reclaim: bytes to give back (512MiB, 1GiB, ...); empty: all cached.");
ABSL_FLAG(int, depth, 0, "dump: levels below the system managers, 0 for all.");
ABSL_FLAG(std::string, model, "", "infer: model name.");
ABSL_FLAG(std::string, model_version, "", "infer: model version; empty for the latest.");
ABSL_FLAG(int, timeout_seconds, 30, "Deadline of each call.");
ABSL_FLAG(std::string, http, "",
          "health/metadata/infer: KServe v2 HTTP/REST address of ndserved (host:port) to use "
          "instead of gRPC at --server.");
ABSL_FLAG(std::string, out, "memory-map.html",
          "memory-map: the HTML file to write (the daemon's /memory page, offline).");

namespace ndserve::cli {
namespace {

namespace admin = ::ndserve::admin::v1;

// The admin token, read once from --token_file; empty when none was given.
std::string& AdminToken() {
  static std::string token;
  return token;
}

std::unique_ptr<grpc::ClientContext> Context(bool admin_call) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(absl::GetFlag(FLAGS_timeout_seconds)));
  if (admin_call && !AdminToken().empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", AdminToken()));
  }
  return context;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

int Fail(const grpc::Status& status) {
  std::cerr << "error: " << StatusCodeName(FromGrpcStatus(status).code()) << ": "
            << status.error_message() << "\n";
  return EXIT_FAILURE;
}

int Fail(const absl::Status& status) { return Fail(ToGrpcStatus(status)); }

void PrintPools(const google::protobuf::RepeatedPtrField<admin::PoolStatus>& pools) {
  for (const admin::PoolStatus& p : pools) {
    std::cout << p.device() << " " << p.pool() << ": allocated " << FormatBytes(p.allocated_bytes())
              << ", cached " << FormatBytes(p.cached_bytes()) << ", reserved "
              << FormatBytes(p.reserved_bytes()) << ", limit "
              << (p.limit_bytes() == 0 ? std::string("none") : FormatBytes(p.limit_bytes()))
              << ", peak " << FormatBytes(p.peak_allocated_bytes()) << ", "
              << p.outstanding_allocations() << " live blocks, " << p.oom_count() << " OOMs\n";
  }
}

int Status() {
  auto stub = admin::MemoryAdmin::NewStub(Channel(absl::GetFlag(FLAGS_admin)));
  admin::GetMemoryStatusRequest request;
  request.set_device_id(absl::GetFlag(FLAGS_device_id));
  request.set_device(absl::GetFlag(FLAGS_device));
  request.set_include_outstanding(absl::GetFlag(FLAGS_outstanding));
  admin::MemoryStatus response;
  grpc::Status s = stub->GetMemoryStatus(Context(true).get(), request, &response);
  if (!s.ok()) return Fail(s);
  std::cout << response.text();
  return EXIT_SUCCESS;
}

int Reclaim() {
  auto stub = admin::MemoryAdmin::NewStub(Channel(absl::GetFlag(FLAGS_admin)));
  admin::ReclaimRequest request;
  request.set_device_id(absl::GetFlag(FLAGS_device_id));
  request.set_device(absl::GetFlag(FLAGS_device));
  if (const std::string target = absl::GetFlag(FLAGS_target); !target.empty()) {
    absl::StatusOr<MemoryLimit> bytes = ParseMemoryLimit(target, "--target");
    if (!bytes.ok()) return Fail(bytes.status());
    if (bytes->unlimited || bytes->fraction > 0) {
      return Fail(absl::InvalidArgumentError("--target takes a size such as 512MiB"));
    }
    request.set_target_bytes(bytes->bytes);
  }
  admin::ReclaimResponse response;
  grpc::Status s = stub->Reclaim(Context(true).get(), request, &response);
  if (!s.ok()) return Fail(s);
  std::cout << "reclaimed " << FormatBytes(response.reclaimed_bytes()) << "\n";
  PrintPools(response.pools());
  return EXIT_SUCCESS;
}

int Dump() {
  auto stub = admin::MemoryAdmin::NewStub(Channel(absl::GetFlag(FLAGS_admin)));
  admin::DebugDumpRequest request;
  request.set_max_depth(absl::GetFlag(FLAGS_depth));
  admin::DebugDumpResponse response;
  grpc::Status s = stub->DebugDump(Context(true).get(), request, &response);
  if (!s.ok()) return Fail(s);
  std::cout << response.text();
  return EXIT_SUCCESS;
}

absl::Duration Timeout() { return absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds)); }

// As Triton: 200 is live / ready, anything else (400) is not.
int HttpHealth(const std::string& address) {
  int rc = EXIT_SUCCESS;
  for (const char* name : {"live", "ready"}) {
    absl::StatusOr<HttpReply> reply = HttpGet(address, absl::StrCat("/v2/health/", name), Timeout());
    if (!reply.ok()) return Fail(reply.status());
    const bool up = reply->status == 200;
    std::cout << (name == std::string("live") ? "liveness" : "readiness") << ": "
              << (up ? "SERVING" : "NOT_SERVING") << "\n";
    if (!up) rc = EXIT_FAILURE;
  }
  return rc;
}

// The same page as the daemon's /memory, from the admin GetMemorySnapshot.
int MemoryMap() {
  auto stub = admin::MemoryAdmin::NewStub(Channel(absl::GetFlag(FLAGS_admin)));
  admin::GetMemorySnapshotRequest request;
  request.set_device_id(absl::GetFlag(FLAGS_device_id));
  request.set_device(absl::GetFlag(FLAGS_device));
  admin::MemorySnapshot response;
  grpc::Status s = stub->GetMemorySnapshot(Context(true).get(), request, &response);
  if (!s.ok()) return Fail(s);
  const std::string path = absl::GetFlag(FLAGS_out);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << RenderMemoryMapPage(response);
  file.close();
  if (!file) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot write --out='", path, "'")));
  }
  int blocks = 0;
  for (const admin::PoolSnapshot& pool : response.pools()) {
    for (const admin::SnapshotSegment& segment : pool.segments()) blocks += segment.blocks_size();
  }
  std::cout << "wrote " << path << ": " << response.pools_size() << " pools, " << blocks
            << " blocks\n";
  return EXIT_SUCCESS;
}

int Health() {
  if (const std::string http = absl::GetFlag(FLAGS_http); !http.empty()) return HttpHealth(http);
  auto stub = grpc::health::v1::Health::NewStub(Channel(absl::GetFlag(FLAGS_server)));
  int rc = EXIT_SUCCESS;
  for (const char* name : {"liveness", "readiness"}) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = stub->Check(Context(false).get(), request, &response);
    if (!s.ok()) return Fail(s);
    std::cout << name << ": "
              << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
              << "\n";
    if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) rc = EXIT_FAILURE;
  }
  return rc;
}

template <typename T>
void Append(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// One value of `dtype` from text, appended little-endian.
absl::Status AppendValue(absl::string_view dtype, absl::string_view text, std::string* out) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a valid ", dtype));
  };
  if (dtype == "FP32" || dtype == "FP64") {
    double v;
    if (!absl::SimpleAtod(text, &v)) return bad();
    dtype == "FP32" ? Append(out, static_cast<float>(v)) : Append(out, v);
  } else if (dtype == "BOOL") {
    if (text != "0" && text != "1" && text != "true" && text != "false") return bad();
    Append<std::uint8_t>(out, text == "1" || text == "true");
  } else if (absl::StartsWith(dtype, "UINT")) {
    std::uint64_t v;
    if (!absl::SimpleAtoi(text, &v)) return bad();
    switch (ndserve::protocol::ElementSize(dtype)) {
      case 1:
        Append(out, static_cast<std::uint8_t>(v));
        break;
      case 2:
        Append(out, static_cast<std::uint16_t>(v));
        break;
      case 4:
        Append(out, static_cast<std::uint32_t>(v));
        break;
      default:
        Append(out, v);
    }
  } else if (absl::StartsWith(dtype, "INT")) {
    std::int64_t v;
    if (!absl::SimpleAtoi(text, &v)) return bad();
    switch (ndserve::protocol::ElementSize(dtype)) {
      case 1:
        Append(out, static_cast<std::int8_t>(v));
        break;
      case 2:
        Append(out, static_cast<std::int16_t>(v));
        break;
      case 4:
        Append(out, static_cast<std::int32_t>(v));
        break;
      default:
        Append(out, v);
    }
  } else if (dtype == "BYTES") {
    Append(out, static_cast<std::uint32_t>(text.size()));
    out->append(text.data(), text.size());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(dtype, " values cannot be typed in; use zeros or @file"));
  }
  return absl::OkStatus();
}

// NAME:DATATYPE:SHAPE:DATA into the request.
absl::Status AddInput(absl::string_view spec, inference::ModelInferRequest* request) {
  std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 3));
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", spec, "': expected NAME:DATATYPE:SHAPE:DATA"));
  }
  const std::string& dtype = parts[1];
  const int element_size = ndserve::protocol::ElementSize(dtype);
  if (element_size < 0) return absl::InvalidArgumentError(absl::StrCat("unknown datatype ", dtype));
  auto* input = request->add_inputs();
  input->set_name(parts[0]);
  input->set_datatype(dtype);
  absl::StatusOr<std::vector<std::int64_t>> dims = ndserve::protocol::ParseDims(parts[2]);
  if (!dims.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", parts[0], "': ", dims.status().message()));
  }
  absl::StatusOr<std::int64_t> elements = ndserve::protocol::ElementCount(*dims);
  if (!elements.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", parts[0], "': ", elements.status().message()));
  }
  input->mutable_shape()->Add(dims->begin(), dims->end());
  std::string* raw = request->add_raw_input_contents();
  const std::string& data = parts[3];
  if (data == "zeros") {
    if (element_size == 0) {
      for (std::int64_t i = 0; i < *elements; ++i) Append<std::uint32_t>(raw, 0);
    } else {
      raw->assign(static_cast<size_t>(*elements * element_size), '\0');
    }
  } else if (absl::StartsWith(data, "@")) {
    std::ifstream in(data.substr(1), std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", data.substr(1)));
    std::ostringstream contents;
    contents << in.rdbuf();
    *raw = contents.str();
  } else {
    for (absl::string_view v : absl::StrSplit(data, ',')) {
      if (absl::Status s = AppendValue(dtype, v, raw); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// The first few elements of a raw output, for a human.
std::string Preview(absl::string_view dtype, const std::string& raw) {
  constexpr int kMax = 16;
  std::vector<std::string> values;
  const char* p = raw.data();
  const char* end = raw.data() + raw.size();
  auto take = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    p += sizeof(v);
    return v;
  };
  const int size = ndserve::protocol::ElementSize(dtype);
  while (p < end && static_cast<int>(values.size()) < kMax) {
    if (dtype == "BYTES") {
      if (end - p < 4) break;
      const std::uint32_t n = take(std::uint32_t{});
      if (static_cast<std::uint32_t>(end - p) < n) break;
      values.push_back(absl::StrCat("\"", absl::string_view(p, n), "\""));
      p += n;
      continue;
    }
    if (size <= 0 || end - p < size) break;
    if (dtype == "FP32")
      values.push_back(absl::StrCat(take(float{})));
    else if (dtype == "FP64")
      values.push_back(absl::StrCat(take(double{})));
    else if (dtype == "BOOL")
      values.push_back(take(std::uint8_t{}) ? "true" : "false");
    else if (dtype == "INT8")
      values.push_back(absl::StrCat(take(std::int8_t{})));
    else if (dtype == "INT16")
      values.push_back(absl::StrCat(take(std::int16_t{})));
    else if (dtype == "INT32")
      values.push_back(absl::StrCat(take(std::int32_t{})));
    else if (dtype == "INT64")
      values.push_back(absl::StrCat(take(std::int64_t{})));
    else if (dtype == "UINT8")
      values.push_back(absl::StrCat(take(std::uint8_t{})));
    else if (dtype == "UINT16")
      values.push_back(absl::StrCat(take(std::uint16_t{})));
    else if (dtype == "UINT32")
      values.push_back(absl::StrCat(take(std::uint32_t{})));
    else if (dtype == "UINT64")
      values.push_back(absl::StrCat(take(std::uint64_t{})));
    else
      break;  // FP16 / BF16: sizes only
  }
  std::string out = absl::StrJoin(values, ", ");
  if (p < end) absl::StrAppend(&out, values.empty() ? "" : ", ", "... (", raw.size(), " bytes)");
  return out;
}

int Metadata() {
  const std::string model = absl::GetFlag(FLAGS_model);
  const std::string version = absl::GetFlag(FLAGS_model_version);
  if (model.empty()) return Fail(absl::InvalidArgumentError("metadata needs --model"));
  if (const std::string http = absl::GetFlag(FLAGS_http); !http.empty()) {
    const std::string path = absl::StrCat("/v2/models/", model,
                                          version.empty() ? "" : absl::StrCat("/versions/", version));
    absl::StatusOr<HttpReply> reply = HttpGet(http, path, Timeout());
    if (!reply.ok()) return Fail(reply.status());
    std::cout << reply->body << "\n";
    return reply->status == 200 ? EXIT_SUCCESS : EXIT_FAILURE;
  }
  auto stub = inference::GRPCInferenceService::NewStub(Channel(absl::GetFlag(FLAGS_server)));
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  grpc::Status s = stub->ModelMetadata(Context(false).get(), request, &response);
  if (!s.ok()) return Fail(s);
  std::cout << response.DebugString();
  return EXIT_SUCCESS;
}

int Infer(const std::vector<char*>& inputs) {
  inference::ModelInferRequest request;
  request.set_model_name(absl::GetFlag(FLAGS_model));
  request.set_model_version(absl::GetFlag(FLAGS_model_version));
  if (request.model_name().empty()) {
    return Fail(absl::InvalidArgumentError("infer needs --model"));
  }
  for (const char* spec : inputs) {
    if (absl::Status s = AddInput(spec, &request); !s.ok()) return Fail(s);
  }
  inference::ModelInferResponse response;
  const auto start = std::chrono::steady_clock::now();
  if (const std::string http = absl::GetFlag(FLAGS_http); !http.empty()) {
    absl::StatusOr<inference::ModelInferResponse> reply = HttpInfer(http, request, Timeout());
    if (!reply.ok()) return Fail(reply.status());
    response = *std::move(reply);
  } else {
    auto stub = inference::GRPCInferenceService::NewStub(Channel(absl::GetFlag(FLAGS_server)));
    grpc::Status s = stub->ModelInfer(Context(false).get(), request, &response);
    if (!s.ok()) return Fail(s);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << response.model_name();
  if (!response.model_version().empty()) std::cout << " version " << response.model_version();
  std::cout << " in " << ms << " ms\n";
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    std::cout << "  " << out.name() << " " << out.datatype() << " ["
              << absl::StrJoin(out.shape(), "x") << "]";
    if (i < response.raw_output_contents_size()) {
      std::cout << ": " << Preview(out.datatype(), response.raw_output_contents(i));
    }
    std::cout << "\n";
  }
  return EXIT_SUCCESS;
}

}  // namespace
}  // namespace ndserve::cli

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/cli_main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "ndserve-cli <status|reclaim|dump|memory-map|health|metadata|infer|train> [flags] [INPUT...]\n"
      "  INPUT (infer): NAME:DATATYPE:SHAPE:DATA, e.g. x:FP32:1x4:1,2,3,4 or "
      "x:FP16:1x8:zeros or x:UINT8:64:@file.bin");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::cerr << absl::ProgramUsageMessage() << "\n";
    return EXIT_FAILURE;
  }
  if (const std::string path = absl::GetFlag(FLAGS_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = ndserve::ReadAdminToken(path);
    if (!token.ok()) {
      std::cerr << "error: " << token.status().message() << "\n";
      return EXIT_FAILURE;
    }
    ndserve::cli::AdminToken() = *token;
  }
  const std::string command = args[1];
  const std::vector<char*> rest(args.begin() + 2, args.end());
  if (command == "train") {
    return ndserve::cli::Train(rest, ndserve::cli::Channel(absl::GetFlag(FLAGS_admin)),
                               [] { return ndserve::cli::Context(true); });
  }
  if (command != "infer" && !rest.empty()) {
    std::cerr << "error: " << command << " takes no positional arguments\n";
    return EXIT_FAILURE;
  }
  if (command == "status") return ndserve::cli::Status();
  if (command == "reclaim") return ndserve::cli::Reclaim();
  if (command == "dump") return ndserve::cli::Dump();
  if (command == "memory-map") return ndserve::cli::MemoryMap();
  if (command == "health") return ndserve::cli::Health();
  if (command == "metadata") return ndserve::cli::Metadata();
  if (command == "infer") return ndserve::cli::Infer(rest);
  std::cerr << "error: unknown command '" << command << "'\n"
            << absl::ProgramUsageMessage() << "\n";
  return EXIT_FAILURE;
}
