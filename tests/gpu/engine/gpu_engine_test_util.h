#ifndef NDSERVE_TESTS_GPU_ENGINE_GPU_ENGINE_TEST_UTIL_H_
#define NDSERVE_TESTS_GPU_ENGINE_GPU_ENGINE_TEST_UTIL_H_

// What the GPU engine tests share: a model repository assembled from the example and
// fixture models (with extra config lines), the reference request of each model, and
// the predictors of a loaded model on cuda:0.

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/predictor.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine::gpu_testing {

namespace fs = std::filesystem;

#define NDSERVE_REQUIRE_GPU() \
  if (::ndserve::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// Where model `name` comes from: the examples (mlp, recsys) or the test fixtures.
inline fs::path ModelSource(const std::string& name) {
  const fs::path examples = testing::SourceDir() / "examples/models" / name;
  if (fs::exists(examples / "config.pbtxt")) return examples;
  return testing::SourceDir() / "tests/fixtures/models" / name;
}

// Copies model `name` into the repository `repo`, appending `extra` (e.g. a
// `parameters { ... }` line) to its config.pbtxt.
inline void AddModel(const fs::path& repo, const std::string& name, const std::string& extra = "") {
  fs::copy(ModelSource(name), repo / name, fs::copy_options::recursive);
  if (!extra.empty()) {
    std::ofstream(repo / name / "config.pbtxt", std::ios::app) << "\n" << extra << "\n";
  }
}

inline std::string Parameter(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value: { string_value: \"" + value + "\" } }";
}

// The reference case of model `name` (tests/fixtures/models/<name>/reference).
inline testing::Case ReferenceCase(const std::string& name) {
  return testing::ReadCase(testing::SourceDir() / "tests/fixtures/models" / name / "reference");
}

// The predictors of the loaded model `name`, for their counters.
inline std::vector<const Predictor*> PredictorsOf(const Engine& engine, const std::string& name) {
  std::vector<const Predictor*> out;
  absl::StatusOr<std::shared_ptr<ServedModel>> served = engine.GetModel(name);
  EXPECT_TRUE(served.ok()) << served.status();
  if (!served.ok()) return out;
  for (const auto& p : (*served)->predictors().predictors()) out.push_back(p.get());
  return out;
}

// The GPU counters of every predictor of `name`, added up.
inline kernels::GpuResources::Counters CountersOf(const Engine& engine, const std::string& name) {
  kernels::GpuResources::Counters sum;
  for (const Predictor* p : PredictorsOf(engine, name)) {
    EXPECT_NE(p->gpu(), nullptr) << name << " has a predictor off the GPU";
    if (p->gpu() == nullptr) continue;
    sum.syncs += p->gpu()->counters().syncs;
    sum.h2d_copies += p->gpu()->counters().h2d_copies;
    sum.d2h_copies += p->gpu()->counters().d2h_copies;
    sum.graph_launches += p->gpu()->counters().graph_launches;
  }
  return sum;
}

// The CUDA graph cache statistics of every predictor of `name`, added up (all zero when
// the predictors have no cache).
inline CudaGraphCache::Stats GraphStatsOf(const Engine& engine, const std::string& name) {
  CudaGraphCache::Stats sum;
  for (const Predictor* p : PredictorsOf(engine, name)) {
    if (p->graphs() == nullptr) continue;
    sum.replays += p->graphs()->stats().replays;
    sum.captures += p->graphs()->stats().captures;
    sum.failed_captures += p->graphs()->stats().failed_captures;
    sum.evictions += p->graphs()->stats().evictions;
  }
  return sum;
}

// The largest absolute difference between two FP32 outputs of the same shape.
inline float MaxAbsDiff(const InferOutputTensor& a, const InferOutputTensor& b) {
  EXPECT_EQ(a.data.size(), b.data.size());
  const std::size_t n = std::min(a.data.size(), b.data.size()) / sizeof(float);
  const auto* x = reinterpret_cast<const float*>(a.data.data());
  const auto* y = reinterpret_cast<const float*>(b.data.data());
  float m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

}  // namespace ndserve::engine::gpu_testing

#endif  // NDSERVE_TESTS_GPU_ENGINE_GPU_ENGINE_TEST_UTIL_H_
