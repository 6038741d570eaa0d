// The real `ndserved` binary over loopback gRPC: every GRPCInferenceService RPC,
// ModelInfer on the example models against the numpy references, malformed requests
// (right code, message naming the problem, and the daemon keeps serving), unload plus
// admin reclaim, model_control_mode=none, and the graceful SIGTERM drain.
#include <grpcpp/client_context.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Stub = inference::GRPCInferenceService::Stub;

constexpr int64_t kMiB = 1 << 20;

std::unique_ptr<grpc::ClientContext> Context(int seconds = 30) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

grpc::Status Infer(Stub& stub, const ModelInferRequest& request, ModelInferResponse* response) {
  return stub.ModelInfer(Context().get(), request, response);
}

// Compares FP32 outputs with the reference within its tolerance.
void ExpectMatchesReference(const ModelInferResponse& response, const ReferenceCase& c) {
  ASSERT_EQ(response.outputs_size(), static_cast<int>(c.outputs.size()));
  ASSERT_EQ(response.raw_output_contents_size(), response.outputs_size());
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const CaseTensor& want = c.outputs[i];
    SCOPED_TRACE(want.name);
    EXPECT_EQ(response.outputs(i).name(), want.name);
    EXPECT_EQ(response.outputs(i).datatype(), want.datatype);
    EXPECT_EQ(std::vector<int64_t>(response.outputs(i).shape().begin(),
                                   response.outputs(i).shape().end()),
              want.shape);
    ASSERT_EQ(want.datatype, "FP32");
    const std::string& got = response.raw_output_contents(i);
    ASSERT_EQ(got.size(), want.bytes.size());
    std::vector<float> g(got.size() / 4), w(want.bytes.size() / 4);
    std::memcpy(g.data(), got.data(), got.size());
    std::memcpy(w.data(), want.bytes.data(), want.bytes.size());
    for (size_t k = 0; k < g.size(); ++k) {
      EXPECT_LE(std::fabs(g[k] - w[k]), c.atol + c.rtol * std::fabs(w[k])) << "element " << k;
    }
  }
}

// One daemon for the tests that only read state.
class NdservedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start();
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->Inference();
  }

  // The mlp reference request, known to succeed: the daemon still serves.
  void ExpectStillServes() {
    absl::StatusOr<ReferenceCase> c = ReadReferenceCase("mlp");
    ASSERT_TRUE(c.ok()) << c.status();
    ModelInferResponse response;
    grpc::Status s = Infer(*stub_, RequestFor("mlp", *c), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ExpectMatchesReference(response, *c);
  }

  void ExpectError(const ModelInferRequest& request, grpc::StatusCode code,
                   const std::string& fragment) {
    ModelInferResponse response;
    grpc::Status s = Infer(*stub_, request, &response);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(fragment));
    ExpectStillServes();
  }

  static ModelInferRequest MlpRequest(const std::string& datatype, std::vector<int64_t> shape,
                                      std::string raw, const std::string& name = "input") {
    ModelInferRequest r;
    r.set_model_name("mlp");
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype(datatype);
    for (int64_t d : shape) in->add_shape(d);
    r.add_raw_input_contents(std::move(raw));
    return r;
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<Stub> stub_;
};

DaemonProcess* NdservedTest::daemon_ = nullptr;

TEST_F(NdservedTest, ServerRpcs) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(Context().get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ServerMetadataResponse md;
  ASSERT_TRUE(stub_->ServerMetadata(Context().get(), {}, &md).ok());
  EXPECT_EQ(md.name(), "ndserve");
  EXPECT_FALSE(md.version().empty());
  EXPECT_THAT(md.extensions(),
              ::testing::IsSupersetOf({"model_repository", "statistics", "model_configuration"}));
}

TEST_F(NdservedTest, ModelReadyMetadataAndConfig) {
  for (const auto& [name, version, want] : std::vector<std::tuple<std::string, std::string, bool>>{
           {"mlp", "", true}, {"recsys", "1", true}, {"mlp", "2", false}, {"nope", "", false}}) {
    inference::ModelReadyRequest request;
    request.set_name(name);
    request.set_version(version);
    inference::ModelReadyResponse response;
    ASSERT_TRUE(stub_->ModelReady(Context().get(), request, &response).ok());
    EXPECT_EQ(response.ready(), want) << name << " v" << version;
  }

  inference::ModelMetadataRequest md_request;
  md_request.set_name("mlp");
  inference::ModelMetadataResponse md;
  grpc::Status s = stub_->ModelMetadata(Context().get(), md_request, &md);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(md.name(), "mlp");
  EXPECT_THAT(md.versions(), ElementsAre("1"));
  ASSERT_EQ(md.inputs_size(), 1);
  EXPECT_EQ(md.inputs(0).name(), "input");
  EXPECT_EQ(md.inputs(0).datatype(), "FP32");
  EXPECT_THAT(md.inputs(0).shape(), ElementsAre(-1, 64));
  ASSERT_EQ(md.outputs_size(), 1);
  EXPECT_EQ(md.outputs(0).name(), "probabilities");
  EXPECT_THAT(md.outputs(0).shape(), ElementsAre(-1, 10));

  md_request.set_name("nope");
  s = stub_->ModelMetadata(Context().get(), md_request, &md);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("nope"));

  inference::ModelConfigRequest config_request;
  config_request.set_name("recsys");
  inference::ModelConfigResponse config;
  s = stub_->ModelConfig(Context().get(), config_request, &config);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(config.config().name(), "recsys");
  EXPECT_EQ(config.config().max_batch_size(), 64);
  ASSERT_EQ(config.config().input_size(), 2);
  EXPECT_EQ(config.config().input(0).name(), "sparse_ids");
  EXPECT_EQ(config.config().input(0).data_type(), inference::TYPE_INT64);
}

TEST_F(NdservedTest, RepositoryIndexAndStatistics) {
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(Context().get(), {}, &index).ok());
  ASSERT_GE(index.models_size(), 2);
  std::map<std::string, std::string> state;
  for (const auto& m : index.models()) state[m.name()] = m.state();
  EXPECT_EQ(state["mlp"], "READY");
  EXPECT_EQ(state["recsys"], "READY");

  ExpectStillServes();
  inference::ModelStatisticsRequest request;
  request.set_name("mlp");
  inference::ModelStatisticsResponse stats;
  grpc::Status s = stub_->ModelStatistics(Context().get(), request, &stats);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).name(), "mlp");
  EXPECT_EQ(stats.model_stats(0).version(), "1");
  EXPECT_GE(stats.model_stats(0).inference_stats().success().count(), 1u);
  EXPECT_GT(stats.model_stats(0).inference_stats().compute_infer().ns(), 0u);
  EXPECT_GT(stats.model_stats(0).last_inference(), 0u);

  request.set_name("nope");
  EXPECT_EQ(stub_->ModelStatistics(Context().get(), request, &stats).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(NdservedTest, InferMatchesTheReferences) {
  for (const std::string model : {"mlp", "recsys"}) {
    SCOPED_TRACE(model);
    absl::StatusOr<ReferenceCase> c = ReadReferenceCase(model);
    ASSERT_TRUE(c.ok()) << c.status();
    ModelInferRequest request = RequestFor(model, *c);
    request.set_id(absl::StrCat("req-", model));
    ModelInferResponse response;
    grpc::Status s = Infer(*stub_, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_name(), model);
    EXPECT_EQ(response.model_version(), "1");
    EXPECT_EQ(response.id(), absl::StrCat("req-", model));
    ExpectMatchesReference(response, *c);
  }
}

TEST_F(NdservedTest, TypedContentsMatchTheReference) {
  absl::StatusOr<ReferenceCase> c = ReadReferenceCase("mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ModelInferRequest request = RequestFor("mlp", *c);
  request.clear_raw_input_contents();
  const std::string& raw = c->inputs[0].bytes;
  std::vector<float> values(raw.size() / 4);
  std::memcpy(values.data(), raw.data(), raw.size());
  for (float v : values) request.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
  request.add_outputs()->set_name("probabilities");
  ModelInferResponse response;
  grpc::Status s = Infer(*stub_, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectMatchesReference(response, *c);
}

TEST_F(NdservedTest, WrongShape) {
  ExpectError(MlpRequest("FP32", {3, 63}, std::string(3 * 63 * 4, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'input': shape [3,63]");
}

TEST_F(NdservedTest, WrongDatatype) {
  ExpectError(MlpRequest("FP64", {3, 64}, std::string(3 * 64 * 8, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT,
              "input 'input': datatype FP64 does not match the model's FP32");
}

TEST_F(NdservedTest, ByteSizeNotMatchingTheShape) {
  ExpectError(MlpRequest("FP32", {3, 64}, std::string(767, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT,
              "input 'input': expected 768 bytes for shape [3,64] FP32, got 767");
}

TEST_F(NdservedTest, BothRawAndTyped) {
  ModelInferRequest r = MlpRequest("FP32", {1, 64}, std::string(256, '\0'));
  for (int i = 0; i < 64; ++i) r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(0);
  ExpectError(r, grpc::StatusCode::INVALID_ARGUMENT,
              "input 'input': both raw_input_contents and typed contents given");
}

TEST_F(NdservedTest, UnknownInputName) {
  ExpectError(MlpRequest("FP32", {1, 64}, std::string(256, '\0'), "pixels"),
              grpc::StatusCode::INVALID_ARGUMENT, "unexpected input 'pixels'");
}

TEST_F(NdservedTest, UnknownRequestedOutput) {
  ModelInferRequest r = MlpRequest("FP32", {1, 64}, std::string(256, '\0'));
  r.add_outputs()->set_name("logits");
  ExpectError(r, grpc::StatusCode::INVALID_ARGUMENT, "unknown output 'logits'");
}

TEST_F(NdservedTest, UnknownModel) {
  ModelInferRequest r = MlpRequest("FP32", {1, 64}, std::string(256, '\0'));
  r.set_model_name("nope");
  ExpectError(r, grpc::StatusCode::NOT_FOUND, "unknown model 'nope'");
}

TEST_F(NdservedTest, EmptyRequest) {
  // Zero bytes on the wire: no model, no inputs.
  ExpectError(ModelInferRequest(), grpc::StatusCode::INVALID_ARGUMENT, "has no inputs");
  ModelInferRequest r;
  r.set_model_name("mlp");
  ExpectError(r, grpc::StatusCode::INVALID_ARGUMENT, "request for model 'mlp' has no inputs");
}

TEST_F(NdservedTest, HugeDimension) {
  const int64_t big = int64_t{1} << 40;
  ExpectError(MlpRequest("FP32", {big, big}, std::string(256, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT,
              "input 'input': shape [1099511627776,1099511627776] has too many elements");
  ExpectError(MlpRequest("FP32", {int64_t{1} << 60, 64}, std::string(256, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'input': shape [1152921504606846976,64]");
  // A huge batch with the right byte count cannot exist; one within the bytes but over
  // max_batch_size is the engine's to refuse.
  ExpectError(MlpRequest("FP32", {65, 64}, std::string(65 * 64 * 4, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT, "max_batch_size");
}

TEST_F(NdservedTest, NegativeDimensionAndUnknownDatatype) {
  ExpectError(MlpRequest("FP32", {-1, 64}, std::string(256, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'input': shape [-1,64] has a negative");
  ExpectError(MlpRequest("FLOAT", {1, 64}, std::string(256, '\0')),
              grpc::StatusCode::INVALID_ARGUMENT, "input 'input': unknown datatype 'FLOAT'");
}

TEST(NdservedRepositoryTest, UnloadThenReclaimReturnsTheModelsBytes) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start();
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();
  auto admin = (*d)->Admin();
  absl::StatusOr<uint64_t> before = AllocatedBytes(*admin);
  ASSERT_TRUE(before.ok()) << before.status();

  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("recsys");
  inference::RepositoryModelUnloadResponse unloaded;
  grpc::Status s = stub->RepositoryModelUnload(Context().get(), unload, &unloaded);
  ASSERT_TRUE(s.ok()) << s.error_message();

  inference::ModelReadyRequest ready_request;
  ready_request.set_name("recsys");
  inference::ModelReadyResponse ready;
  ASSERT_TRUE(stub->ModelReady(Context().get(), ready_request, &ready).ok());
  EXPECT_FALSE(ready.ready());
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub->RepositoryIndex(Context().get(), {}, &index).ok());
  for (const auto& m : index.models()) {
    if (m.name() == "recsys") EXPECT_EQ(m.state(), "UNAVAILABLE");
  }
  absl::StatusOr<ReferenceCase> recsys = ReadReferenceCase("recsys");
  ASSERT_TRUE(recsys.ok()) << recsys.status();
  ModelInferResponse response;
  EXPECT_EQ(Infer(*stub, RequestFor("recsys", *recsys), &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // Unloading twice: nothing is loaded.
  EXPECT_EQ(stub->RepositoryModelUnload(Context().get(), unload, &unloaded).error_code(),
            grpc::StatusCode::NOT_FOUND);

  // recsys holds ~49 MiB of embedding tables: they went back to the pool...
  absl::StatusOr<uint64_t> after = AllocatedBytes(*admin);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LE(*after + 45 * kMiB, *before) << "before " << *before << ", after " << *after;
  // ...and a reclaim gives them back to the device.
  grpc::ClientContext reclaim_context;
  ndserve::admin::v1::ReclaimRequest reclaim;
  reclaim.set_device_id(-1);
  ndserve::admin::v1::ReclaimResponse reclaimed;
  s = admin->Reclaim(&reclaim_context, reclaim, &reclaimed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(reclaimed.reclaimed_bytes(), static_cast<uint64_t>(45 * kMiB));

  absl::StatusOr<std::string> metrics = HttpGet((*d)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "ndserve_model_loaded", R"(model="recsys",version="1")"), 0);
  EXPECT_EQ(MetricValue(*metrics, "ndserve_model_loaded", R"(model="mlp",version="1")"), 1);

  // Loading it again serves it again.
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("recsys");
  inference::RepositoryModelLoadResponse loaded;
  s = stub->RepositoryModelLoad(Context(120).get(), load, &loaded);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Infer(*stub, RequestFor("recsys", *recsys), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ExpectMatchesReference(response, *recsys);
  metrics = HttpGet((*d)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "ndserve_model_loaded", R"(model="recsys",version="1")"), 1);
  EXPECT_THAT((*d)->Log(), HasSubstr("model 'recsys' unloaded"));
  EXPECT_THAT((*d)->Log(), HasSubstr("model 'recsys' loaded"));

  // A model that is not in the repository.
  load.set_model_name("nope");
  s = stub->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("nope"));
}

TEST(NdservedRepositoryTest, ControlModeNoneRefusesLoadAndUnload) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
      DaemonProcess::Start({"--model_control_mode=none"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("mlp");
  inference::RepositoryModelLoadResponse loaded;
  grpc::Status s = stub->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("model_control_mode=none"));
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("mlp");
  inference::RepositoryModelUnloadResponse unloaded;
  EXPECT_EQ(stub->RepositoryModelUnload(Context().get(), unload, &unloaded).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // Every model was still loaded at start and serves.
  absl::StatusOr<ReferenceCase> c = ReadReferenceCase("mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  ModelInferResponse response;
  s = Infer(*stub, RequestFor("mlp", *c), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
}

// SIGTERM while clients keep sending: readiness turns NOT_SERVING, requests in flight
// finish with OK, later ones are refused, none is cut off inside the engine; the models
// unload and the pools report nothing allocated; exit status 0.
//
// Which of the clients' requests are inside the daemon at the signal is up to the
// scheduler: on a loaded machine all six were once still in the transport, refused by the
// drain. So one request is made to be in flight for certain: to "held", mlp gathering a
// batch for kHeldDelay, signalled only once the daemon counts it in flight.
TEST(NdservedShutdownTest, InFlightRequestsFinishAndReadinessDrops) {
  constexpr auto kHeldDelay = std::chrono::seconds(2);
  TempModelRepository repo;
  ASSERT_FALSE(repo.path().empty());
  repo.AddExample("recsys");
  repo.AddModel(
      "held", std::filesystem::path(SourceDir()) / "examples/models/mlp/1/model.onnx",
      absl::StrCat(R"(max_batch_size: 64
input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
dynamic_batching { max_queue_delay_microseconds: )",
                   std::chrono::duration_cast<std::chrono::microseconds>(kHeldDelay).count(),
                   " }\n"));
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {"--exit_timeout_seconds=30", "--model_repository=" + repo.path().string()});
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  absl::StatusOr<ReferenceCase> c = ReadReferenceCase("recsys");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ReferenceCase> mlp = ReadReferenceCase("mlp");
  ASSERT_TRUE(mlp.ok()) << mlp.status();

  // Readiness as a Watch stream, opened before the signal.
  std::vector<int> watched;
  std::mutex watched_mu;
  auto health = daemon.Health();
  grpc::ClientContext watch_context;
  grpc::health::v1::HealthCheckRequest watch_request;
  watch_request.set_service("readiness");
  auto reader = health->Watch(&watch_context, watch_request);
  std::thread watcher([&] {
    grpc::health::v1::HealthCheckResponse update;
    while (reader->Read(&update)) {
      std::lock_guard<std::mutex> lock(watched_mu);
      watched.push_back(update.status());
    }
  });

  using Clock = std::chrono::steady_clock;
  struct Outcome {
    Clock::time_point start, end;
    grpc::StatusCode code;
    std::string message;
  };
  std::mutex outcomes_mu;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> clients;
  const ModelInferRequest request = RequestFor("recsys", *c);
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&] {
      auto stub = daemon.Inference();
      // Until the daemon refuses us (after the signal), or a safety cap.
      for (int i = 0; i < 20000; ++i) {
        ModelInferResponse response;
        Outcome o;
        o.start = Clock::now();
        grpc::Status s = Infer(*stub, request, &response);
        o.end = Clock::now();
        o.code = s.error_code();
        o.message = s.error_message();
        {
          std::lock_guard<std::mutex> lock(outcomes_mu);
          outcomes.push_back(o);
        }
        if (!s.ok()) break;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The held request, gathering inside the daemon when the signal comes.
  Outcome held;
  std::thread held_client([&] {
    ModelInferRequest request = RequestFor("mlp", *mlp);
    request.set_model_name("held");
    ModelInferResponse response;
    held.start = Clock::now();
    grpc::Status s = Infer(*daemon.Inference(), request, &response);
    held.end = Clock::now();
    held.code = s.error_code();
    held.message = s.error_message();
  });
  bool held_in_flight = false;
  for (int i = 0; i < 100 && !held_in_flight; ++i) {
    absl::StatusOr<std::string> metrics = HttpGet(daemon.metrics_port(), "/metrics");
    held_in_flight = metrics.ok() && MetricValue(*metrics, "ndserve_inference_inflight",
                                                 R"(model="held")") == 1.0;
    if (!held_in_flight) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const Clock::time_point signal_time = Clock::now();
  daemon.Signal(SIGTERM);
  held_client.join();
  for (std::thread& t : clients) t.join();
  const std::optional<int> exit_status = daemon.Wait(std::chrono::seconds(60));
  watcher.join();

  ASSERT_EQ(exit_status, 0) << daemon.Log();
  ASSERT_TRUE(held_in_flight) << "the held request never showed in flight";
  EXPECT_EQ(held.code, grpc::StatusCode::OK) << held.message;
  EXPECT_LT(held.start, signal_time);
  EXPECT_GT(held.end, signal_time);
  int ok_before = 0;
  for (const Outcome& o : outcomes) {
    // A call that reaches the daemon after the drain began is refused: UNAVAILABLE, or
    // CANCELLED when it raced the GOAWAY (gRPC drops calls that arrive on a shutting-down
    // server before it matched them). One sent well before the signal reached the daemon
    // before the drain began and must complete.
    if (o.start < signal_time - std::chrono::milliseconds(100)) {
      EXPECT_EQ(o.code, grpc::StatusCode::OK) << o.message;
    } else {
      EXPECT_THAT(o.code, AnyOf(grpc::StatusCode::OK, grpc::StatusCode::UNAVAILABLE,
                                grpc::StatusCode::CANCELLED))
          << o.message;
    }
    if (o.code == grpc::StatusCode::OK) {
      if (o.end < signal_time) ++ok_before;
    }
  }
  EXPECT_GT(ok_before, 0);
  {
    std::lock_guard<std::mutex> lock(watched_mu);
    ASSERT_GE(watched.size(), 2u);
    EXPECT_EQ(watched.front(), grpc::health::v1::HealthCheckResponse::SERVING);
    EXPECT_EQ(watched.back(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  const std::string log = daemon.Log();
  EXPECT_THAT(log, HasSubstr("unloaded every model"));
  // No request failed inside the engine, cut off or otherwise.
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "unloaded model 'recsys' version 1: .* requests \\(0 failed\\)"));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "unloaded model 'held' version 1: .* after 1 requests \\(0 failed\\)"));
  EXPECT_THAT(log, HasSubstr("0 B allocated in 0 blocks"));
  EXPECT_THAT(log, HasSubstr("stopped"));
}

}  // namespace
}  // namespace ndserve::testing
