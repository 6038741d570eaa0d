// The embedding-leak regression (docs/design.md §2). An embedding lookup gathered rows from
// the parameter table; the table was the op's first input, so under "the output belongs
// to the manager of the first input" every request attached its result to the model
// manager and leaked it. These tests replay that scenario for 10,000 requests: written
// the buggy way it must fail loudly on the capped model manager instead of growing;
// written the fixed way (sub-scope of the input, table temp-attached, result returned)
// nothing may change between before and after.
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "memory/nd_manager.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::Must;

constexpr int kRequests = 10000;
constexpr std::int64_t kVocab = 512;
constexpr std::int64_t kDim = 16;
constexpr std::int64_t kIdsPerRequest = 4;

// The engine does not exist yet, so the op is written here the way an engine op is:
// the output scope comes from the caller, the output is made with Create there, and the
// kernel is a plain CPU loop. out[i, :] = table[ids[i], :].
absl::StatusOr<NDArray> Gather(const OutputScope& scope, const NDArray& table, const NDArray& ids) {
  absl::StatusOr<std::shared_ptr<NDManager>> manager = scope.Resolve({table, ids});
  if (!manager.ok()) return manager.status();
  const std::int64_t n = ids.num_elements();
  const std::int64_t dim = table.shape()[1];
  absl::StatusOr<NDArray> out = (*manager)->Create({n, dim}, DType::kFp32, "gathered");
  if (!out.ok()) return out.status();
  absl::StatusOr<const float*> rows = table.DataAs<float>();
  absl::StatusOr<const std::int64_t*> index = ids.DataAs<std::int64_t>();
  absl::StatusOr<float*> dst = out->DataAs<float>();
  if (!rows.ok()) return rows.status();
  if (!index.ok()) return index.status();
  if (!dst.ok()) return dst.status();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t id = (*index)[i];
    if (id < 0 || id >= table.shape()[0]) return absl::OutOfRangeError("embedding id");
    std::memcpy(*dst + i * dim, *rows + id * dim, dim * sizeof(float));
  }
  return out;
}

class EmbeddingLeakTest : public testing_util::ScopeTest {
 protected:
  void SetUp() override {
    model_ = Base(ManagerLevel::kModel, "embedding-model");
    std::vector<float> values(kVocab * kDim);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
    table_ = Must(model_->FromHostValues<float>({kVocab, kDim}, values, "embedding.weight"));
    model_->Cap();
    predictor_ = Base(ManagerLevel::kPredictor, "embedding-predictor");
    predictor_->Cap();
  }
  void TearDown() override {
    ASSERT_TRUE(predictor_->Close().ok());
    ASSERT_TRUE(model_->Close().ok());
  }

  static std::vector<std::int64_t> IdsFor(int request) {
    std::vector<std::int64_t> ids(kIdsPerRequest);
    for (int i = 0; i < kIdsPerRequest; ++i) ids[i] = (request * 7 + i * 131) % kVocab;
    return ids;
  }

  static void ExpectRows(const NDArray& out, const std::vector<std::int64_t>& ids) {
    std::vector<float> got = Must(out.ToVector<float>());
    ASSERT_EQ(got.size(), ids.size() * kDim);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      for (std::int64_t j = 0; j < kDim; ++j) {
        ASSERT_EQ(got[i * kDim + j], static_cast<float>(ids[i] * kDim + j));
      }
    }
  }

  struct Counts {
    std::int64_t model_resources, predictor_resources;
    std::uint64_t model_bytes, pool_allocated;
    std::size_t predictor_children;
    bool operator==(const Counts&) const = default;
  };
  Counts Snapshot() {
    return {model_->resource_count(), predictor_->resource_count(), model_->bytes(),
            AllocatedBytes(), predictor_->child_count()};
  }

  std::shared_ptr<NDManager> model_;
  std::shared_ptr<NDManager> predictor_;
  NDArray table_;
};

// (a) The original bug: the result is created where the first input lives. The model
// manager is capped, so every request fails with the cap error and nothing grows.
TEST_F(EmbeddingLeakTest, TheBuggyWayFailsLoudlyOnTheCappedModelManager) {
  const Counts before = Snapshot();
  const std::int64_t violations_before = memory_.LevelCounts()[ManagerLevel::kModel].cap_violations;
  for (int request = 0; request < kRequests; ++request) {
    ScopedManager ctx(Must(predictor_->NewSubManager(ManagerLevel::kContext)));
    NDArray ids = Must(ctx->FromHostValues<std::int64_t>({kIdsPerRequest}, IdsFor(request)));
    absl::StatusOr<NDArray> out = Gather(OutputScope::OfFirstInput(), table_, ids);
    ASSERT_FALSE(out.ok()) << "request " << request << " attached its result to the model";
    ASSERT_TRUE(absl::IsFailedPrecondition(out.status())) << out.status();
    ASSERT_NE(out.status().message().find("manager 'embedding-model' is capped"),
              absl::string_view::npos)
        << out.status();
  }
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kModel].cap_violations - violations_before,
            kRequests);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_TRUE(model_->Holds(table_));
}

// Why the cap matters: the same buggy loop against an uncapped model manager leaks one
// array per request, which is exactly the slow growth the cap turns into an error.
TEST_F(EmbeddingLeakTest, WithoutTheCapTheBuggyWayLeaksOneArrayPerRequest) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> uncapped = Base(ManagerLevel::kModel, "uncapped-model");
  NDArray table = Must(uncapped->Create({kVocab, kDim}, DType::kFp32));
  ASSERT_TRUE(table.CopyFromHost(Must(table_.ToHost())).ok());
  const std::uint64_t pool_before = AllocatedBytes();
  constexpr int kFew = 100;
  for (int request = 0; request < kFew; ++request) {
    ScopedManager ctx(Must(predictor_->NewSubManager(ManagerLevel::kContext)));
    NDArray ids = Must(ctx->FromHostValues<std::int64_t>({kIdsPerRequest}, IdsFor(request)));
    ASSERT_TRUE(Gather(OutputScope::OfFirstInput(), table, ids).ok());
  }
  EXPECT_EQ(uncapped->resource_count(), 1 + kFew);
  EXPECT_GT(AllocatedBytes(), pool_before);
  ASSERT_TRUE(uncapped->Close().ok());
  EXPECT_EQ(AllocatedBytes(), baseline);
}

// (b) The fix, DJL style: a sub-scope of the input, the table temp-attached to it (so
// "manager of the first input" is now the sub-scope), and only the result returned.
TEST_F(EmbeddingLeakTest, TheFixedWayLeavesEveryCountUnchanged) {
  const Counts before = Snapshot();
  for (int request = 0; request < kRequests; ++request) {
    ScopedManager ctx(Must(predictor_->NewSubManager(ManagerLevel::kContext)));
    const std::vector<std::int64_t> id_values = IdsFor(request);
    NDArray ids = Must(ctx->FromHostValues<std::int64_t>({kIdsPerRequest}, id_values));
    NDArray out;
    {
      ScopedManager scope(Must(NDManager::SubManagerOf(ids)));
      ASSERT_TRUE(scope->TempAttachAll({table_}).ok());
      out = Must(Gather(OutputScope::OfFirstInput(), table_, ids));
      ASSERT_TRUE(scope->Holds(out));
      ASSERT_TRUE(scope->Ret(out).ok());
    }  // the table goes back to the (capped) model manager here
    ASSERT_TRUE(ctx->Holds(out));
    ASSERT_TRUE(model_->Holds(table_));
    if (request % 1000 == 0) ExpectRows(out, id_values);
  }
  EXPECT_EQ(Snapshot(), before);
  EXPECT_TRUE(table_.valid());
}

// The ndserve way: the op is told its output scope (the request's context), so
// argument order does not matter and no temp-attach is needed.
TEST_F(EmbeddingLeakTest, TheExplicitScopeWayLeavesEveryCountUnchanged) {
  const Counts before = Snapshot();
  for (int request = 0; request < kRequests; ++request) {
    ScopedManager ctx(Must(predictor_->NewSubManager(ManagerLevel::kContext)));
    const std::vector<std::int64_t> id_values = IdsFor(request);
    NDArray ids = Must(ctx->FromHostValues<std::int64_t>({kIdsPerRequest}, id_values));
    NDArray out = Must(Gather(OutputScope::In(ctx.get()), table_, ids));
    ASSERT_TRUE(ctx->Holds(out));
    if (request % 1000 == 0) ExpectRows(out, id_values);
  }
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace ndserve
