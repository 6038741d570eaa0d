// Sub-manager objects are reused by the thread that opened them once they are closed
// and nobody holds them (docs/design.md §2, "Context objects"): a reopened one must be
// indistinguishable from a new one, and one still held must never be reopened.
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/nd_manager.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::IsFreedError;
using testing_util::Must;

class NDManagerReuseTest : public testing_util::ScopeTest {};

// More than the per-thread ring of closed managers holds, so every slot comes round.
constexpr int kRounds = 40;

TEST_F(NDManagerReuseTest, AReopenedContextLooksNew) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor, "predictor");
  predictor->Cap();
  std::set<std::uint64_t> uids;
  for (int i = 0; i < kRounds; ++i) {
    const ManagerLevel level = i % 2 == 0 ? ManagerLevel::kContext : ManagerLevel::kBatch;
    const std::string name = i % 3 == 0 ? std::string() : absl::StrCat("ctx-", i);
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(level, name));
    ASSERT_NE(ctx, nullptr);
    EXPECT_FALSE(ctx->closed());
    EXPECT_FALSE(ctx->capped());
    EXPECT_EQ(ctx->level(), level);
    EXPECT_EQ(ctx->parent(), predictor);
    EXPECT_EQ(ctx->resource_count(), 0);
    EXPECT_EQ(ctx->bytes(), 0u);
    EXPECT_EQ(ctx->child_count(), 0u);
    EXPECT_TRUE(uids.insert(ctx->uid()).second) << "uid " << ctx->uid() << " seen before";
    if (name.empty()) {
      EXPECT_EQ(ctx->name(), absl::StrCat(ManagerLevelName(level), "/", ctx->uid()));
    } else {
      EXPECT_EQ(ctx->name(), name);
    }
    EXPECT_NE(predictor->DebugDump().find(ctx->name()), std::string::npos);

    // Leave as much behind as a life can: arrays, a child (its list), a cap.
    NDArray array = Must(ctx->Create({4, 4}, DType::kFp32));
    std::shared_ptr<NDManager> child = Must(ctx->NewSubManager());
    NDArray in_child = Must(child->Create({8}, DType::kInt32));
    EXPECT_EQ(ctx->child_count(), 1u);
    ctx->Cap();
    EXPECT_FALSE(ctx->Create({1}, DType::kFp32).ok());
    if (i % 4 == 0) {
      ASSERT_TRUE(predictor->NewSubManager().ok());  // left open: the predictor closes it
    }
    ASSERT_TRUE(ctx->Close().ok());
    EXPECT_TRUE(child->closed());
    EXPECT_TRUE(IsFreedError(array.Data().status()));
    EXPECT_TRUE(IsFreedError(in_child.Data().status()));
  }
  EXPECT_EQ(predictor->child_count(), static_cast<std::size_t>((kRounds + 3) / 4));
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_EQ(AllocatedBytes(), 0u);
}

TEST_F(NDManagerReuseTest, AHeldClosedContextIsNeverReopened) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> held = Must(predictor->NewSubManager(ManagerLevel::kContext, "held"));
  const std::uint64_t uid = held->uid();
  ASSERT_TRUE(held->Close().ok());
  for (int i = 0; i < kRounds; ++i) {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    EXPECT_NE(ctx.get(), held.get());
    ASSERT_TRUE(ctx->Close().ok());
  }
  EXPECT_TRUE(held->closed());
  EXPECT_EQ(held->uid(), uid);
  EXPECT_EQ(held->name(), "held");
  EXPECT_EQ(held->parent(), nullptr);
  EXPECT_FALSE(held->Create({1}, DType::kFp32).ok());
}

TEST_F(NDManagerReuseTest, AnOpenContextNobodyElseHoldsOutlivesTheRingComingRound) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  NDManager* open = nullptr;
  NDArray array;
  {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext, "open"));
    array = Must(ctx->Create({16}, DType::kFp32));
    open = ctx.get();
  }  // dropped while open: the predictor holds it
  for (int i = 0; i < kRounds; ++i) {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    EXPECT_NE(ctx.get(), open);
    ASSERT_TRUE(ctx->Close().ok());
  }
  EXPECT_TRUE(array.valid());
  EXPECT_EQ(Must(NDManager::ManagerOf(array)).get(), open);
  EXPECT_NE(predictor->DebugDump().find("open"), std::string::npos);
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_TRUE(IsFreedError(array.Data().status()));
  EXPECT_EQ(AllocatedBytes(), 0u);
}

TEST_F(NDManagerReuseTest, AHandleKeptPastCloseNamesTheManagerThatFreedIt) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> first = Must(predictor->NewSubManager(ManagerLevel::kContext));
  const std::uint64_t uid = first->uid();
  NDArray kept = Must(first->Create({3, 3}, DType::kFp32, "kept"));
  ASSERT_TRUE(first->Close().ok());
  first.reset();
  for (int i = 0; i < kRounds; ++i) {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    NDArray other = Must(ctx->Create({3, 3}, DType::kFp32));
    ASSERT_TRUE(ctx->Close().ok());
  }
  absl::Status status = kept.Data().status();
  EXPECT_TRUE(IsFreedError(status)) << status;
  EXPECT_NE(status.message().find(absl::StrCat("#", uid, " (context)")), absl::string_view::npos)
      << status;
  EXPECT_EQ(kept.name(), "kept");
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_EQ(AllocatedBytes(), 0u);
}

TEST_F(NDManagerReuseTest, ContextsClosedAndDroppedOnAnotherThread) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  predictor->Cap();
  // Opened here, filled, closed and dropped there; this thread reopens what the other
  // one let go of.
  for (int round = 0; round < 4; ++round) {
    std::vector<std::shared_ptr<NDManager>> batch;
    for (int i = 0; i < kRounds; ++i) {
      batch.push_back(Must(predictor->NewSubManager(ManagerLevel::kContext)));
      EXPECT_FALSE(batch.back()->closed());
      EXPECT_EQ(batch.back()->resource_count(), 0);
    }
    std::thread other([&batch] {
      for (std::shared_ptr<NDManager>& ctx : batch) {
        for (int k = 0; k < 8; ++k) ASSERT_TRUE(ctx->Create({k + 1, 32}, DType::kFp32).ok());
        ASSERT_TRUE(ctx->Close().ok());
        ctx.reset();
      }
    });
    other.join();
  }
  EXPECT_EQ(predictor->child_count(), 0u);
  EXPECT_EQ(AllocatedBytes(), 0u);
}

TEST_F(NDManagerReuseTest, AContextOutlivesTheThreadThatOpenedIt) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> open, closed;
  std::thread opener([&] {
    // Fill the thread's ring, then open the two that leave with the thread.
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_TRUE(Must(predictor->NewSubManager(ManagerLevel::kContext))->Close().ok());
    }
    open = Must(predictor->NewSubManager(ManagerLevel::kContext, "open"));
    closed = Must(predictor->NewSubManager(ManagerLevel::kContext, "closed"));
    ASSERT_TRUE(closed->Close().ok());
  });
  opener.join();
  NDArray array = Must(open->Create({64}, DType::kFp32));
  EXPECT_EQ(open->resource_count(), 1);
  EXPECT_NE(predictor->DebugDump().find("open"), std::string::npos);
  EXPECT_TRUE(closed->closed());
  EXPECT_EQ(closed->name(), "closed");
  ASSERT_TRUE(open->Close().ok());
  EXPECT_TRUE(IsFreedError(array.Data().status()));
  EXPECT_EQ(AllocatedBytes(), 0u);
}

}  // namespace
}  // namespace ndserve
