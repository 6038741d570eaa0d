// Inputs the loader fuzzers (tests/fuzz/) found, kept as fixtures under tests/fixtures/fuzz/
// so that a normal build (without clang or sanitizers) checks them too. Each finding has
// its own test saying what the input must now do; the sweep at the end loads every kept
// input the way the daemon would, under a small memory limit.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/attrs/data.h"
#include "kernels/data_plans.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

namespace fs = std::filesystem;
using testing::SourceDir;

fs::path FuzzFixture(const std::string& name) {
  return SourceDir() / "tests/fixtures/fuzz/onnx_model" / name;
}

MemoryConfig LimitedTo(uint64_t bytes) {
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = bytes;
  return config;
}

absl::StatusOr<std::shared_ptr<ServedModel>> LoadFixture(const fs::path& path,
                                                         MemorySystem* memory) {
  ModelLoadSpec spec;
  spec.name = path.stem().string();
  spec.model_path = path.string();
  spec.device = Device::Cpu();
  return ServedModel::Load(spec, memory);
}

// Slice steps near INT64_MAX overflowed step * input stride in the slice plan
// (kernels/data_plans.cc); a step at least as long as the axis takes one element.
TEST(FuzzRegressionTest, SliceWithAHugeStepTakesOneElement) {
  MemorySystem memory;
  absl::StatusOr<std::shared_ptr<ServedModel>> model =
      LoadFixture(FuzzFixture("slice_huge_step.onnx"), &memory);
  ASSERT_TRUE(model.ok()) << model.status();

  // data is 4x5x6 = 0..119; starts [0, -100, 1], ends [100, 100, 6], steps [huge, 3, 2]:
  // rows {0}, columns {0, 3}, depths {1, 3, 5}.
  std::vector<float> data(120);
  for (int i = 0; i < 120; ++i) data[i] = static_cast<float>(i);
  InferenceRequest request;
  request.model_name = "slice_huge_step";
  request.inputs.push_back(
      {"data", DType::kFp32, {4, 5, 6},
       absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data.data()), data.size() * 4)});
  absl::StatusOr<InferenceResponse> response = (*model)->Infer(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->outputs.size(), 1u);
  const InferOutputTensor& out = response->outputs[0];
  EXPECT_THAT(out.shape, ::testing::ElementsAre(1, 2, 3));
  ASSERT_EQ(out.data.size(), 6 * sizeof(float));
  const float* y = reinterpret_cast<const float*>(out.data.data());
  EXPECT_THAT(std::vector<float>(y, y + 6), ::testing::ElementsAre(1, 3, 5, 19, 21, 23));
}

// The same plan with the extreme steps of both signs (INT64_MIN could not even be
// negated).
TEST(FuzzRegressionTest, SlicePlanTakesExtremeStepsWithoutOverflow) {
  const kernels::Shape in = {4, 5};
  kernels::SliceAttrs forward;
  forward.starts = {1, 0};
  forward.ends = {INT64_MAX, INT64_MAX};
  forward.steps = {INT64_MAX, 2};
  absl::StatusOr<kernels::SliceResolved> r = kernels::ResolveSlice(in, forward);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->out_shape, ::testing::ElementsAre(1, 3));
  EXPECT_EQ(r->plan.offset, 5);  // row 1
  EXPECT_EQ(r->plan.numel, 3);

  kernels::SliceAttrs backward;
  backward.starts = {-1, -1};
  backward.ends = {INT64_MIN, INT64_MIN};
  backward.steps = {INT64_MIN, -1};
  r = kernels::ResolveSlice(in, backward);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->out_shape, ::testing::ElementsAre(1, 5));
  EXPECT_EQ(r->plan.offset, 19);  // row 3, column 4, walking back
  EXPECT_EQ(r->plan.numel, 5);
}

// A Resize scale of 2.9e23 made an output dimension whose conversion to int64 was
// undefined (kernels/resize_plan.cc); it is now a load error naming the scale.
TEST(FuzzRegressionTest, ResizeWithAHugeScaleIsALoadError) {
  MemorySystem memory;
  absl::Status status = LoadFixture(FuzzFixture("resize_huge_scale.onnx"), &memory).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("too large")) << status;
}

// Pads near INT64_MAX overflowed dim + begin + end in Pad's shape rule
// (kernels/rules/data.cc).
TEST(FuzzRegressionTest, PadsThatOverflowTheDimAreALoadError) {
  MemorySystem memory;
  absl::Status status = LoadFixture(FuzzFixture("pad_overflow.onnx"), &memory).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("overflow")) << status;
}

// A node listing one output name twice made the graph builder read the node after the
// last one to name the "other" producer (engine/graph_builder.cc).
TEST(FuzzRegressionTest, ANodeListingAnOutputTwiceIsALoadError) {
  MemorySystem memory;
  absl::Status status = LoadFixture(FuzzFixture("output_listed_twice.onnx"), &memory).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("output 'out1' is listed twice")) << status;
}

// Every kept input loads or fails with a code a bad model may produce, and a failed or
// unloaded model leaves nothing in the pool.
TEST(FuzzRegressionTest, EveryKeptInputLoadsOrFailsCleanly) {
  std::vector<fs::path> inputs;
  for (const fs::directory_entry& e :
       fs::directory_iterator(SourceDir() / "tests/fixtures/fuzz/onnx_model")) {
    inputs.push_back(e.path());
  }
  ASSERT_FALSE(inputs.empty());
  MemorySystem memory(LimitedTo(4 << 20));
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (const fs::path& path : inputs) {
    SCOPED_TRACE(path.filename().string());
    absl::StatusOr<std::shared_ptr<ServedModel>> model = LoadFixture(path, &memory);
    if (model.ok()) {
      (*model)->Unload();
    } else {
      EXPECT_THAT(model.status().code(),
                  ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                   absl::StatusCode::kUnimplemented,
                                   absl::StatusCode::kResourceExhausted,
                                   absl::StatusCode::kOutOfRange))
          << model.status();
    }
    model = absl::UnknownError("released");
    EXPECT_EQ((*pool)->Stats().allocated_bytes, 0u);
  }
}

}  // namespace
}  // namespace ndserve::engine
