// Padded dynamic batches (engine/dynamic_batcher.h, Options::pad_to_power_of_two): a
// merged batch runs at the next power of two rows, the pad repeating its last row, and
// each request gets exactly its own rows back, equal to its answer when run alone. The
// predictor is held (LaneHolder) while requests queue, so batches form without clocks.
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "engine/dynamic_batcher.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/batcher_test_util.h"

namespace ndserve::engine {
namespace {

using testing::LaneHolder;
using testing::LoadExample;
using testing::MlpRequest;
using testing::Result;

std::vector<float> Floats(const InferOutputTensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

// Three one-row mlp requests that queue behind a held predictor and then run as one
// merged batch; `pad` is the model's pad_batches parameter (unset: the device decides).
// Returns the rows the batcher padded with, after checking every answer.
uint64_t RunThreeMerged(std::optional<bool> pad) {
  MemorySystem memory;
  auto model = LoadExample(&memory, "mlp", [pad](ModelConfig& c) {
    c.max_batch_size = 64;
    c.dynamic_batching.emplace();
    c.pad_batches = pad;
  });
  auto alone = LoadExample(&memory, "mlp", [](ModelConfig& c) { c.dynamic_batching.reset(); });
  EXPECT_TRUE(model && alone);
  if (!model || !alone) return 0;
  std::vector<std::unique_ptr<MlpRequest>> requests;
  std::vector<Result> results(3);
  {
    LaneHolder holder(*model);
    for (int i = 0; i < 3; ++i) {
      requests.push_back(std::make_unique<MlpRequest>(10 + i));
      model->InferAsync(requests[i]->request, results[i].Callback());
    }
    holder.Release();
    EXPECT_TRUE(holder.ok());
  }
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<InferenceResponse> got = results[i].Wait();
    absl::StatusOr<InferenceResponse> want = alone->Infer(requests[i]->request);
    EXPECT_TRUE(got.ok() && want.ok());
    if (!got.ok() || !want.ok()) continue;
    EXPECT_EQ(got->outputs.size(), want->outputs.size());
    if (got->outputs.empty() || want->outputs.empty()) continue;
    EXPECT_EQ(got->outputs[0].shape, want->outputs[0].shape) << "request " << i;
    const std::vector<float> a = Floats(got->outputs[0]), b = Floats(want->outputs[0]);
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) continue;
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-5) << i << " " << k;
  }
  // The holder's row and the three; padded rows are not inferences.
  EXPECT_EQ(model->stats().inference_count, 4u);
  EXPECT_EQ(model->stats().execution_count, 2u) << "the three did not run as one batch";
  return model->batcher()->stats().padded_rows;
}

TEST(BatchPaddingTest, PaddedRowsIsTheNextPowerOfTwoAtMostTheMaximum) {
  EXPECT_EQ(DynamicBatcher::PaddedRows(1, 64), 1);
  EXPECT_EQ(DynamicBatcher::PaddedRows(3, 64), 4);
  EXPECT_EQ(DynamicBatcher::PaddedRows(4, 64), 4);
  EXPECT_EQ(DynamicBatcher::PaddedRows(33, 64), 64);
  EXPECT_EQ(DynamicBatcher::PaddedRows(33, 48), 48);
  EXPECT_EQ(DynamicBatcher::PaddedRows(48, 48), 48);
}

TEST(BatchPaddingTest, AMergedBatchRunsPaddedAndEachRequestGetsItsOwnRows) {
  EXPECT_EQ(RunThreeMerged(true), 1u) << "three merged rows run as four";
}

TEST(BatchPaddingTest, OnTheCpuBatchesAreNotPaddedUnlessAsked) {
  EXPECT_EQ(RunThreeMerged(std::nullopt), 0u);
  EXPECT_EQ(RunThreeMerged(false), 0u);
}

}  // namespace
}  // namespace ndserve::engine
