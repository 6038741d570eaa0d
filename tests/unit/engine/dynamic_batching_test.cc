// Dynamic batching (config `dynamic_batching { }`): concurrent requests merge into one
// predictor run and each caller gets exactly its own rows back.
#include <cmath>
#include <latch>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "engine/dynamic_batcher.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

constexpr int64_t kFeatures = 64;  // mlp: input [batch, 64] -> probabilities [batch, 10]
constexpr int64_t kClasses = 10;

// The example mlp with one predictor; `batching` keeps or drops the config's
// dynamic_batching, `delay_us` sets its max_queue_delay_microseconds.
std::shared_ptr<ServedModel> LoadMlp(MemorySystem* memory, bool batching, uint64_t delay_us = 0) {
  ModelRepository repo((SourceDir() / "examples/models").string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel("mlp");
  EXPECT_TRUE(m.ok()) << m.status();
  ModelLoadSpec spec;
  spec.name = "mlp";
  spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
  spec.config = m->config;
  EXPECT_TRUE(spec.config.has_value());
  if (batching) {
    spec.config->dynamic_batching.emplace();
    spec.config->dynamic_batching->max_queue_delay_microseconds = delay_us;
  } else {
    spec.config->dynamic_batching.reset();
  }
  spec.device = Device::Cpu();
  spec.instance_count = 1;
  absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, memory);
  EXPECT_TRUE(served.ok()) << served.status();
  return served.value_or(nullptr);
}

struct MlpRequest {
  MlpRequest(int64_t rows, uint64_t seed) : input(rows * kFeatures) {
    std::mt19937_64 rng(seed);
    for (float& x : input) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    request.model_name = "mlp";
    request.id = absl::StrCat("req-", seed);
    request.inputs.push_back({"input", DType::kFp32, {rows, kFeatures},
                              absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(input.data()),
                                                  input.size() * sizeof(float))});
  }
  std::vector<float> input;
  InferenceRequest request;
};

std::vector<float> Floats(const InferOutputTensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// Fires `requests` at `model` from one thread each, all released at once, and checks
// every response against the same request run alone on `reference`.
void ExpectSameAsAlone(ServedModel& model, ServedModel& reference,
                       const std::vector<MlpRequest>& requests) {
  std::vector<absl::StatusOr<InferenceResponse>> responses(requests.size(),
                                                           absl::UnknownError("not run"));
  std::latch start(static_cast<std::ptrdiff_t>(requests.size()));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      responses[i] = model.Infer(requests[i].request);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(responses[i].ok()) << responses[i].status();
    const InferenceResponse& got = *responses[i];
    EXPECT_EQ(got.id, requests[i].request.id);
    ASSERT_EQ(got.outputs.size(), 1u);
    const int64_t rows = requests[i].request.inputs[0].shape[0];
    EXPECT_EQ(got.outputs[0].shape, (std::vector<int64_t>{rows, kClasses}));
    absl::StatusOr<InferenceResponse> alone = reference.Infer(requests[i].request);
    ASSERT_TRUE(alone.ok()) << alone.status();
    const std::vector<float> a = Floats(got.outputs[0]), b = Floats(alone->outputs[0]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      // Merged rows may go through a different GEMM blocking: rounding only.
      EXPECT_NEAR(a[k], b[k], 1e-5) << "request " << i << " element " << k;
    }
  }
}

TEST(DynamicBatchingTest, ConcurrentRequestsShareOnePredictorRun) {
  // A queue delay long enough that all eight arrive while the first holds the predictor.
  MemorySystem memory;
  auto batched = LoadMlp(&memory, true, /*delay_us=*/300000);
  auto alone = LoadMlp(&memory, false);
  ASSERT_TRUE(batched && alone);
  EXPECT_TRUE(batched->dynamic_batching());
  EXPECT_FALSE(alone->dynamic_batching());
  std::vector<MlpRequest> requests;
  for (int i = 0; i < 8; ++i) requests.emplace_back(1, i);
  ExpectSameAsAlone(*batched, *alone, requests);
  const ModelStatsSnapshot s = batched->stats();
  EXPECT_EQ(s.success_count, 8u);
  EXPECT_EQ(s.inference_count, 8u);
  EXPECT_LT(s.execution_count, 8u) << "no two requests were merged";
  EXPECT_GE(s.execution_count, 1u);
}

TEST(DynamicBatchingTest, RequestsOfSeveralRowsComeBackWithTheirOwnRows) {
  MemorySystem memory;
  auto batched = LoadMlp(&memory, true, /*delay_us=*/200000);
  auto alone = LoadMlp(&memory, false);
  ASSERT_TRUE(batched && alone);
  std::vector<MlpRequest> requests;
  for (int i = 0; i < 6; ++i) requests.emplace_back(1 + i % 3, 100 + i);  // 1, 2, 3 rows
  ExpectSameAsAlone(*batched, *alone, requests);
  EXPECT_EQ(batched->stats().inference_count, 12u);
}

TEST(DynamicBatchingTest, BatchesNeverExceedMaxBatchSize) {
  MemorySystem memory;
  auto batched = LoadMlp(&memory, true, /*delay_us=*/100000);
  auto alone = LoadMlp(&memory, false);
  ASSERT_TRUE(batched && alone);
  ASSERT_EQ(batched->config().max_batch_size, 64);
  std::vector<MlpRequest> requests;
  for (int i = 0; i < 3; ++i) requests.emplace_back(40, 200 + i);  // no two fit together
  ExpectSameAsAlone(*batched, *alone, requests);
  EXPECT_EQ(batched->stats().execution_count, 3u);
}

TEST(DynamicBatchingTest, WithoutConcurrencyARequestRunsAlone) {
  MemorySystem memory;
  auto batched = LoadMlp(&memory, true);
  auto alone = LoadMlp(&memory, false);
  ASSERT_TRUE(batched && alone);
  for (int i = 0; i < 5; ++i) {
    MlpRequest r(2, 300 + i);
    ASSERT_TRUE(batched->Infer(r.request).ok());
  }
  EXPECT_EQ(batched->stats().execution_count, 5u);
  EXPECT_EQ(batched->stats().inference_count, 10u);
}

TEST(DynamicBatchingTest, UnloadFailsQueuedRequestsWithUnavailable) {
  MemorySystem memory;
  auto batched = LoadMlp(&memory, true, /*delay_us=*/500000);
  ASSERT_TRUE(batched);
  MlpRequest r(1, 400);
  absl::StatusOr<InferenceResponse> response = absl::UnknownError("not run");
  std::thread waiting([&] { response = batched->Infer(r.request); });
  // The request holds the predictor slot, waiting for company; unloading refuses it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  batched->Unload();
  waiting.join();
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
}

TEST(DynamicBatcherTest, CompatibleNeedsTheSameInputsOutputsAndRowShape) {
  MlpRequest a(1, 1), b(3, 2);
  ValidatedRequest plan{{0}, {0}, 1}, plan_b{{0}, {0}, 3};
  EXPECT_TRUE(DynamicBatcher::Compatible(a.request, plan, b.request, plan_b));

  MlpRequest other_width(1, 3);
  other_width.request.inputs[0].shape = {1, 32};
  EXPECT_FALSE(DynamicBatcher::Compatible(a.request, plan, other_width.request, plan));

  MlpRequest other_type(1, 4);
  other_type.request.inputs[0].dtype = DType::kInt32;
  EXPECT_FALSE(DynamicBatcher::Compatible(a.request, plan, other_type.request, plan));

  MlpRequest other_name(1, 5);
  other_name.request.inputs[0].name = "x";
  EXPECT_FALSE(DynamicBatcher::Compatible(a.request, plan, other_name.request, plan));

  ValidatedRequest other_outputs{{0}, {}, 1};
  EXPECT_FALSE(DynamicBatcher::Compatible(a.request, plan, a.request, other_outputs));

  MlpRequest bytes(1, 6);
  bytes.request.inputs[0].dtype = DType::kBytes;
  EXPECT_FALSE(DynamicBatcher::Compatible(bytes.request, plan, bytes.request, plan));
}

}  // namespace
}  // namespace ndserve::engine
