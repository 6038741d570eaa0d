// The GPU serving path on cuda:0 (docs/design.md §4.3), skipped without a device:
// staging through the pinned pool with one stream synchronization per run and no device
// allocation after warm-up, CUDA graph capture and replay giving the plain run's
// outputs with the cache's counters moving, and the cuda_graphs switch.
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/gpu/engine/gpu_engine_test_util.h"
#include "tests/unit/engine/recsys_request.h"

namespace ndserve::engine {
namespace {

using gpu_testing::AddModel;
using gpu_testing::CountersOf;
using gpu_testing::GraphStatsOf;
using gpu_testing::Parameter;
using gpu_testing::ReferenceCase;
using ::testing::HasSubstr;

struct ServingCase {
  const char* model;
  bool graphs;
};

class GpuServingTest : public ::testing::TestWithParam<ServingCase> {
 protected:
  void SetUp() override {
    NDSERVE_REQUIRE_GPU();
    if (std::string(GetParam().model) == "recsys") NDSERVE_REQUIRE_RECSYS();
    AddModel(repo_.path(), GetParam().model,
             GetParam().graphs ? "" : Parameter("cuda_graphs", "false"));
    EngineOptions options;
    options.model_repository = repo_.path().string();
    options.device = Device::Cuda(0);
    engine_ = std::make_unique<Engine>(options, &memory_);
    ASSERT_TRUE(engine_->LoadModel(GetParam().model).ok());
  }

  testing::TempDir repo_;
  MemorySystem memory_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(GpuServingTest, OneSyncPerRunAndNoDeviceAllocationAfterWarmUp) {
  const std::string name = GetParam().model;
  const testing::Case c = ReferenceCase(name);
  const InferenceRequest request = testing::MakeRequest(c, name);
  // Warm-up: the pools cache what a run takes, and with graphs the key is captured.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine_->Infer(request).ok());
  absl::StatusOr<Pool*> device = memory_.GetPool(Device::Cuda(0));
  absl::StatusOr<Pool*> pinned = memory_.GetPool(Device::CudaHost(0));
  ASSERT_TRUE(device.ok() && pinned.ok());
  const uint64_t device_allocs = (*device)->Stats().device_allocs;
  const uint64_t pinned_allocs = (*pinned)->Stats().device_allocs;
  const kernels::GpuResources::Counters before = CountersOf(*engine_, name);
  const CudaGraphCache::Stats graphs_before = GraphStatsOf(*engine_, name);
  constexpr int kRuns = 20;
  for (int i = 0; i < kRuns; ++i) {
    absl::StatusOr<InferenceResponse> r = engine_->Infer(request);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outputs.size(), c.outputs.size());
    for (size_t o = 0; o < c.outputs.size(); ++o) {
      EXPECT_TRUE(testing::OutputMatches(r->outputs[o], c.outputs[o], c.atol, c.rtol));
    }
  }
  const kernels::GpuResources::Counters after = CountersOf(*engine_, name);
  EXPECT_EQ(after.syncs - before.syncs, uint64_t{kRuns}) << "one stream synchronization per run";
  EXPECT_EQ(after.h2d_copies - before.h2d_copies, uint64_t{kRuns} * c.GraphInputs().size())
      << "one host-to-device copy per input";
  EXPECT_EQ(after.d2h_copies - before.d2h_copies, uint64_t{kRuns} * c.outputs.size())
      << "one device-to-host copy per output";
  EXPECT_EQ((*device)->Stats().device_allocs, device_allocs) << "cudaMalloc on the request path";
  EXPECT_EQ((*pinned)->Stats().device_allocs, pinned_allocs) << "cudaHostAlloc on the request path";
  const CudaGraphCache::Stats graphs_after = GraphStatsOf(*engine_, name);
  if (GetParam().graphs) {
    EXPECT_EQ(after.graph_launches - before.graph_launches, uint64_t{kRuns});
    EXPECT_EQ(graphs_after.replays - graphs_before.replays, uint64_t{kRuns});
    EXPECT_EQ(graphs_after.captures, 1u);
    EXPECT_EQ(graphs_after.failed_captures, 0u);
  } else {
    EXPECT_EQ(after.graph_launches, 0u);
    for (const Predictor* p : gpu_testing::PredictorsOf(*engine_, name)) {
      EXPECT_EQ(p->graphs(), nullptr) << "cuda_graphs: false keeps no cache";
    }
  }
}

// Every sighting of a key gives the same outputs: plain (1, 2), captured (3), replayed
// (4 on), for two batch sizes interleaved (two keys, two graphs).
TEST_P(GpuServingTest, ReplayGivesThePlainRunsOutputs) {
  const std::string name = GetParam().model;
  const testing::Case c = ReferenceCase(name);
  const int64_t batch = c.inputs[0].dims[0];
  ASSERT_GE(batch, 2);
  std::vector<InferenceRequest> requests = {testing::MakeRequest(c, name),
                                            testing::MakeRequest(c, name)};
  for (InferInputTensor& in : requests[1].inputs) {  // the first row alone
    in.data = in.data.subspan(0, in.data.size() / in.shape[0]);
    in.shape[0] = 1;
  }
  std::vector<std::vector<InferOutputTensor>> first(2);
  for (int i = 0; i < 12; ++i) {
    absl::StatusOr<InferenceResponse> r = engine_->Infer(requests[i % 2]);
    ASSERT_TRUE(r.ok()) << "run " << i << ": " << r.status();
    if (i < 2) {
      first[i] = r->outputs;
      continue;
    }
    ASSERT_EQ(r->outputs.size(), first[i % 2].size());
    for (size_t o = 0; o < r->outputs.size(); ++o) {
      EXPECT_EQ(r->outputs[o].shape, first[i % 2][o].shape);
      const float diff = gpu_testing::MaxAbsDiff(r->outputs[o], first[i % 2][o]);
      EXPECT_LE(diff, c.atol) << "run " << i << " output " << o;
      if (i == 11)
        std::printf("%s replay vs plain, output %zu: max abs diff %g\n", name.c_str(), o, diff);
    }
  }
  const CudaGraphCache::Stats stats = GraphStatsOf(*engine_, name);
  if (GetParam().graphs) {
    EXPECT_EQ(stats.captures, 2u);
    EXPECT_EQ(stats.replays, 6u);  // sightings 4..6 of each key
    EXPECT_EQ(stats.failed_captures, 0u);
  } else {
    EXPECT_EQ(stats.captures + stats.replays, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuServingTest,
                         ::testing::Values(ServingCase{"mlp", true}, ServingCase{"mlp", false},
                                           ServingCase{"recsys", true},
                                           ServingCase{"recsys", false}),
                         [](const ::testing::TestParamInfo<ServingCase>& info) {
                           return std::string(info.param.model) +
                                  (info.param.graphs ? "_graphs" : "_plain");
                         });

// A bad Gather index found after a replayed run still names the node, and the next
// replay is clean (the flags are cleared per run).
TEST(GpuServingErrorsTest, GatherIndexOutOfRangeInAReplayNamesTheNode) {
  NDSERVE_REQUIRE_GPU();
  NDSERVE_REQUIRE_RECSYS();
  testing::TempDir repo;
  AddModel(repo.path(), "recsys");
  EngineOptions options;
  options.model_repository = repo.path().string();
  options.device = Device::Cuda(0);
  MemorySystem memory;
  Engine engine(options, &memory);
  ASSERT_TRUE(engine.LoadModel("recsys").ok());
  testing::RecsysRequest recsys(7);
  const InferenceRequest& r = recsys.request;
  std::vector<int64_t>& ids = recsys.ids;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(engine.Infer(r).ok());
  EXPECT_EQ(GraphStatsOf(engine, "recsys").replays, 1u);
  ids[7] = testing::RecsysRequest::kTableRows;  // one past the last row
  absl::Status s = engine.Infer(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'lookup0' (Gather)"));
  EXPECT_EQ(GraphStatsOf(engine, "recsys").replays, 2u);
  ids[7] = 5;
  EXPECT_TRUE(engine.Infer(r).ok());
}

}  // namespace
}  // namespace ndserve::engine
