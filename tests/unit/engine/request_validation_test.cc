// Bad requests are INVALID_ARGUMENT naming the tensor and the problem, never a crash.

#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/engine/recsys_request.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;
using testing::SourceDir;

class RequestValidationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions options;
    options.model_repository = (SourceDir() / "examples/models").string();
    memory_ = new MemorySystem();
    engine_ = new Engine(options, memory_);
    ASSERT_TRUE(engine_->LoadModel("mlp").ok());
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
    delete memory_;  // after the engine that borrows it
    memory_ = nullptr;
  }

  // A valid mlp request of `batch` rows; tests then break one thing.
  InferenceRequest Valid(int64_t batch = 2) {
    bytes_.assign(batch * 64 * 4, 0);
    InferenceRequest r;
    r.model_name = "mlp";
    r.inputs.push_back({"input", DType::kFp32, {batch, 64}, absl::MakeConstSpan(bytes_)});
    return r;
  }

  static void ExpectInvalid(const InferenceRequest& r, const std::string& message) {
    absl::Status s = engine_->Infer(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(message));
  }

  static MemorySystem* memory_;
  static Engine* engine_;
  std::vector<uint8_t> bytes_;
};
MemorySystem* RequestValidationTest::memory_ = nullptr;
Engine* RequestValidationTest::engine_ = nullptr;

TEST_F(RequestValidationTest, AValidRequestRuns) {
  absl::StatusOr<InferenceResponse> r = engine_->Infer(Valid());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "probabilities");
  EXPECT_EQ(r->outputs[0].shape, (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(r->outputs[0].data.size(), 2u * 10 * 4);
}

TEST_F(RequestValidationTest, NamesTheTensorAndTheProblem) {
  InferenceRequest r = Valid();
  r.inputs[0].name = "inputs";
  ExpectInvalid(r, "unexpected input 'inputs' (the model's inputs are: input)");

  r = Valid();
  r.inputs.clear();
  ExpectInvalid(r, "missing input 'input'");

  r = Valid();
  r.inputs.push_back(r.inputs[0]);
  ExpectInvalid(r, "input 'input' is given twice");

  r = Valid();
  r.inputs[0].dtype = DType::kFp64;
  ExpectInvalid(r, "input 'input': datatype FP64 does not match the model's FP32");

  r = Valid();
  r.inputs[0].shape = {2, 32, 2};
  ExpectInvalid(r, "input 'input': shape [2,32,2] does not match the model's [-1,64]");

  r = Valid();
  r.inputs[0].shape = {2, 63};
  ExpectInvalid(r, "shape [2,63] does not match");

  r = Valid();
  r.inputs[0].data = r.inputs[0].data.subspan(0, 100);
  ExpectInvalid(r, "input 'input': 100 bytes of data, but FP32[2,64] needs 512");

  r = Valid(65);
  ExpectInvalid(r, "input 'input': batch size 65 exceeds the model's max_batch_size 64");

  r = Valid();
  r.inputs[0].shape = {0, 64};
  r.inputs[0].data = {};
  ExpectInvalid(r, "input 'input': shape [0,64] has no elements");

  r = Valid();
  r.inputs[0].shape = {-2, 64};
  ExpectInvalid(r, "input 'input'");

  r = Valid();
  r.inputs[0].shape = {int64_t{1} << 62, 64};
  ExpectInvalid(r, "input 'input'");

  r = Valid();
  r.requested_outputs = {"logits"};
  ExpectInvalid(r, "unknown output 'logits' requested (the model's outputs are: probabilities)");

  // Each repeat would copy the output into the response once more.
  r = Valid();
  r.requested_outputs = {"probabilities", "probabilities"};
  ExpectInvalid(r, "output 'probabilities' is requested twice");
}

TEST_F(RequestValidationTest, UnknownModelOrVersionIsNotFound) {
  InferenceRequest r = Valid();
  r.model_name = "resnet";
  EXPECT_EQ(engine_->Infer(r).status().code(), absl::StatusCode::kNotFound);
  r = Valid();
  r.model_version = 7;
  absl::Status s = engine_->Infer(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("version 7"));
}

TEST_F(RequestValidationTest, GatherIndexOutOfRangeIsInvalidArgument) {
  NDSERVE_REQUIRE_RECSYS();
  ASSERT_TRUE(engine_->LoadModel("recsys").ok());
  testing::RecsysRequest recsys(7);
  const InferenceRequest& r = recsys.request;
  std::vector<int64_t>& ids = recsys.ids;
  ASSERT_TRUE(engine_->Infer(r).ok());
  ids[7] = testing::RecsysRequest::kTableRows;  // one past the last row
  absl::Status s = engine_->Infer(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("node 'lookup0' (Gather)"));
  ids[7] = -100000;  // negative indices count from the end; this one is the first row
  EXPECT_TRUE(engine_->Infer(r).ok());
  ids[7] = -100001;
  EXPECT_EQ(engine_->Infer(r).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine_->UnloadModel("recsys").ok());
}

// Random mutations of a valid request: every one returns a status, none crashes.
TEST_F(RequestValidationTest, RandomRequestsNeverCrash) {
  std::mt19937_64 rng(1234);
  std::vector<uint8_t> data(64 * 64 * 8);
  int ok = 0;
  for (int i = 0; i < 2000; ++i) {
    InferenceRequest r;
    r.model_name = "mlp";
    const int n = static_cast<int>(rng() % 3);
    for (int t = 0; t < n; ++t) {
      InferInputTensor in;
      in.name = rng() % 4 == 0 ? "x" : "input";
      in.dtype = static_cast<DType>(rng() % kNumDTypes);
      const int rank = static_cast<int>(rng() % 4);
      for (int d = 0; d < rank; ++d) in.shape.push_back(static_cast<int64_t>(rng() % 70) - 2);
      in.data = absl::MakeConstSpan(data).subspan(0, rng() % data.size());
      if (rng() % 2 == 0 && in.dtype != DType::kBytes && rank == 2 && in.shape[0] > 0 &&
          in.shape[1] > 0) {
        in.data = absl::MakeConstSpan(data).subspan(
            0, std::min<size_t>(data.size(), in.shape[0] * in.shape[1] * DTypeSize(in.dtype)));
      }
      r.inputs.push_back(in);
    }
    absl::StatusOr<InferenceResponse> resp = engine_->Infer(r);
    if (resp.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument) << resp.status();
    }
  }
  EXPECT_GE(ok, 0);
}

}  // namespace
}  // namespace ndserve::engine
