// A sub-manager's first arrays live in inline states its object owns and reuses in every
// life the ring of context objects gives it (docs/design.md §2, "Inline array states"):
// a state still held by a handle or by another manager is never handed out again, and
// what the manager counts, dumps and frees is the same as for arrays made elsewhere.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/nd_manager.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::IsFreedError;
using testing_util::Must;

class NDManagerInlineTest : public testing_util::ScopeTest {
 protected:
  // Opens and closes contexts under `parent` (each creating one array) until this
  // thread's ring reopens `object`; the reopened context, or null after more rounds
  // than the ring has slots.
  std::shared_ptr<NDManager> ReopenObject(const std::shared_ptr<NDManager>& parent,
                                          const NDManager* object) {
    for (int i = 0; i < 64; ++i) {
      std::shared_ptr<NDManager> ctx = Must(parent->NewSubManager(ManagerLevel::kContext));
      if (ctx.get() == object) return ctx;
      NDArray filler = Must(ctx->Create({16}, DType::kFp32));
      EXPECT_TRUE(ctx->Close().ok());
    }
    return nullptr;
  }
};

constexpr int kInline = internal::InlineStates::kCount;

TEST_F(NDManagerInlineTest, TheFirstArraysAreInlineAndTheRestSpill) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor, "predictor");
  predictor->Cap();
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext, "ctx"));
  std::vector<NDArray> arrays;
  std::uint64_t bytes = 0;
  for (int i = 0; i < kInline + 5; ++i) {
    arrays.push_back(Must(ctx->Create({i + 1, 3}, DType::kFp32, absl::StrCat("a", i))));
    bytes += static_cast<std::uint64_t>(i + 1) * 3 * 4;
    EXPECT_EQ(ctx->IsInlineState(arrays.back()), i < kInline) << i;
    EXPECT_TRUE(ctx->Holds(arrays.back()));
  }
  EXPECT_EQ(ctx->resource_count(), kInline + 5);
  EXPECT_EQ(ctx->bytes(), bytes);
  const ManagerLevelSnapshot levels = memory_.LevelCounts();
  EXPECT_EQ(levels[ManagerLevel::kContext].attached_resources, kInline + 5);
  EXPECT_EQ(levels[ManagerLevel::kContext].attached_bytes, static_cast<std::int64_t>(bytes));

  // The dump lists the context and every array, inline or not.
  const std::string dump = predictor->DebugDump();
  EXPECT_NE(dump.find(absl::StrCat("ctx (uid=", ctx->uid(), " level=context device=cpu:0) resources=",
                                   kInline + 5, " bytes=", bytes)),
            std::string::npos)
      << dump;
  const ManagerNodeInfo info = ctx->DebugInfo(/*with_blocks=*/true);
  ASSERT_EQ(info.blocks.size(), static_cast<std::size_t>(kInline + 5));
  std::vector<std::string> names;
  for (const HeldBlock& block : info.blocks) names.push_back(block.array);
  for (int i = 0; i < kInline + 5; ++i) {
    EXPECT_NE(std::find(names.begin(), names.end(), absl::StrCat("a", i)), names.end()) << i;
  }
  EXPECT_GE(info.block_bytes, bytes);

  ASSERT_TRUE(ctx->Close().ok());
  for (const NDArray& array : arrays) {
    EXPECT_TRUE(IsFreedError(array.Data().status()));
    EXPECT_NE(array.DebugString().find("(freed)"), std::string::npos);
  }
  EXPECT_EQ(arrays[0].shape(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(arrays[0].name(), "a0");
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

// The manager, not the handle, owns the array: with every handle dropped, the dump and
// the memory snapshot still name it (sanitized builds drop states on a slower path, and
// that path once cleared the name).
TEST_F(NDManagerInlineTest, AnArrayWhoseHandlesAreDroppedKeepsItsName) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  {
    NDArray weights = Must(ctx->Zeros({1000}, DType::kFp32, "weights"));
    EXPECT_TRUE(ctx->IsInlineState(weights));
  }
  const ManagerNodeInfo info = ctx->DebugInfo(/*with_blocks=*/true);
  ASSERT_EQ(info.blocks.size(), 1u);
  EXPECT_EQ(info.blocks[0].array, "weights");
  EXPECT_EQ(info.blocks[0].requested, 4000u);
  // The state's next life, unnamed, has no name.
  ASSERT_TRUE(ctx->Close().ok());
  const NDManager* object = ctx.get();
  ctx.reset();
  std::shared_ptr<NDManager> again = ReopenObject(predictor, object);
  ASSERT_NE(again, nullptr);
  NDArray unnamed = Must(again->Create({4}, DType::kFp32));
  EXPECT_TRUE(again->IsInlineState(unnamed));
  EXPECT_EQ(unnamed.name(), "");
  ASSERT_TRUE(again->Close().ok());
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, InlineStatesAreReusedByLaterContexts) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  predictor->Cap();
  for (int round = 0; round < 40; ++round) {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    std::vector<NDArray> arrays;
    for (int i = 0; i < kInline; ++i) {
      // Named in odd rounds: an unnamed array in a state that had a name has none.
      const std::string name = round % 2 == 1 ? absl::StrCat("r", round, "-", i) : std::string();
      arrays.push_back(Must(ctx->Create({round + 1, i + 1}, DType::kInt32, name)));
      EXPECT_TRUE(ctx->IsInlineState(arrays.back())) << round << " " << i;
      EXPECT_EQ(arrays.back().name(), name);
      EXPECT_EQ(arrays.back().shape(), (std::vector<std::int64_t>{round + 1, i + 1}));
      EXPECT_TRUE(arrays.back().valid());
    }
    EXPECT_EQ(ctx->resource_count(), kInline);
    ASSERT_TRUE(ctx->Close().ok());
    for (const NDArray& array : arrays) {
      const absl::Status status = array.Data().status();
      EXPECT_TRUE(IsFreedError(status));
      EXPECT_NE(status.message().find(absl::StrCat("manager #", ctx->uid())), std::string::npos)
          << status;
    }
  }
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, AHandleKeptPastCloseKeepsItsStateFromReuse) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  const NDManager* object = ctx.get();
  const std::uint64_t old_uid = ctx->uid();
  NDArray kept = Must(ctx->Create({5, 7}, DType::kFp32, "kept"));
  ASSERT_TRUE(ctx->IsInlineState(kept));
  ASSERT_TRUE(ctx->Close().ok());
  ctx.reset();

  // The ring reopens the object (nobody holds it), but the state `kept` names is skipped:
  // the first Create gets a state from elsewhere, the second the next inline one.
  ctx = ReopenObject(predictor, object);
  ASSERT_NE(ctx, nullptr);
  NDArray first = Must(ctx->Create({2}, DType::kFp32));
  NDArray second = Must(ctx->Create({3}, DType::kFp32));
  EXPECT_FALSE(ctx->IsInlineState(first));
  EXPECT_TRUE(ctx->IsInlineState(second));
  EXPECT_TRUE(ctx->IsInlineState(kept));
  EXPECT_FALSE(first.SameArray(kept));
  // `kept` is unchanged: its shape, name, and the freed error naming its own manager.
  EXPECT_EQ(kept.shape(), (std::vector<std::int64_t>{5, 7}));
  EXPECT_EQ(kept.name(), "kept");
  const absl::Status status = kept.Data().status();
  EXPECT_TRUE(IsFreedError(status));
  EXPECT_NE(status.message().find(absl::StrCat("manager #", old_uid)), std::string::npos) << status;
  EXPECT_FALSE(ctx->Holds(kept));
  EXPECT_EQ(ctx->resource_count(), 2);
  ASSERT_TRUE(ctx->Close().ok());
  ctx.reset();

  // Once dropped, its state is handed out again.
  kept = NDArray();
  first = NDArray();
  second = NDArray();
  ctx = ReopenObject(predictor, object);
  ASSERT_NE(ctx, nullptr);
  NDArray again = Must(ctx->Create({4}, DType::kFp32));
  EXPECT_TRUE(ctx->IsInlineState(again));
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, HandlesDroppedOnAnotherThreadFreeTheirStates) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  const NDManager* object = ctx.get();
  std::vector<NDArray> closed_later, closed_first;
  for (int i = 0; i < kInline / 2; ++i) {
    closed_later.push_back(Must(ctx->Create({i + 1}, DType::kFp32)));
    closed_first.push_back(Must(ctx->Create({i + 1}, DType::kFp64)));
  }
  // Half dropped on another thread while the context still holds them, half after Close.
  std::thread([arrays = std::move(closed_later)]() mutable { arrays.clear(); }).join();
  ASSERT_TRUE(ctx->Close().ok());
  std::thread([arrays = std::move(closed_first)]() mutable {
    for (const NDArray& array : arrays) EXPECT_TRUE(IsFreedError(array.Data().status()));
    arrays.clear();
  }).join();
  ctx.reset();
  EXPECT_EQ(AllocatedBytes(), 0u);

  ctx = ReopenObject(predictor, object);
  ASSERT_NE(ctx, nullptr);
  std::vector<NDArray> arrays;
  for (int i = 0; i < kInline; ++i) {
    arrays.push_back(Must(ctx->Create({8}, DType::kFp32)));
    EXPECT_TRUE(ctx->IsInlineState(arrays.back())) << i;
  }
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, AnInlineArrayMovedOutLivesInItsNewOwner) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  std::shared_ptr<NDManager> ctx = Must(model->NewSubManager(ManagerLevel::kContext));
  const NDManager* object = ctx.get();
  NDArray returned = Must(ctx->Create({10}, DType::kFp32, "returned"));
  NDArray borrowed = Must(ctx->Create({20}, DType::kFp32, "borrowed"));
  NDArray stays = Must(ctx->Create({30}, DType::kFp32));
  ASSERT_TRUE(ctx->IsInlineState(returned));
  ASSERT_TRUE(ctx->Ret(returned).ok());
  EXPECT_TRUE(model->Holds(returned));
  EXPECT_EQ(model->resource_count(), 1);
  EXPECT_EQ(ctx->resource_count(), 2);

  // Borrowed by a sibling and handed back: listed in its home from then on.
  {
    ScopedManager other(Must(model->NewSubManager(ManagerLevel::kContext)));
    ASSERT_TRUE(other->TempAttachAll({borrowed}).ok());
    EXPECT_TRUE(other->Holds(borrowed));
    EXPECT_EQ(ctx->resource_count(), 1);
  }
  EXPECT_TRUE(ctx->Holds(borrowed));
  EXPECT_EQ(ctx->resource_count(), 2);
  EXPECT_EQ(ctx->bytes(), (20u + 30u) * 4);
  EXPECT_EQ(ctx->DebugInfo(/*with_blocks=*/true).blocks.size(), 2u);

  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_TRUE(IsFreedError(borrowed.Data().status()));
  EXPECT_TRUE(IsFreedError(stays.Data().status()));
  EXPECT_TRUE(returned.Data().ok());
  ctx.reset();

  // Its state is still the model's, handle or not: a later life of the context skips it.
  returned = NDArray();
  ctx = ReopenObject(model, object);
  ASSERT_NE(ctx, nullptr);
  NDArray first = Must(ctx->Create({1}, DType::kFp32));
  EXPECT_FALSE(ctx->IsInlineState(first));
  EXPECT_EQ(model->resource_count(), 1);
  ASSERT_TRUE(ctx->Close().ok());
  ASSERT_TRUE(model->Close().ok());
  EXPECT_EQ(AllocatedBytes(), 0u);
}

TEST_F(NDManagerInlineTest, AContextDestroyedWhileItsArrayIsHeldKeepsTheArrayReadable) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  NDArray kept;
  std::uint64_t uid = 0;
  // The thread's ring destroys its contexts when the thread exits.
  std::thread([&] {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    uid = ctx->uid();
    kept = Must(ctx->Create({6, 6}, DType::kFp16, "kept"));
    EXPECT_TRUE(ctx->IsInlineState(kept));
    EXPECT_TRUE(ctx->Close().ok());
  }).join();
  EXPECT_EQ(kept.shape(), (std::vector<std::int64_t>{6, 6}));
  EXPECT_EQ(kept.name(), "kept");
  const absl::Status status = kept.Data().status();
  EXPECT_TRUE(IsFreedError(status));
  EXPECT_NE(status.message().find(absl::StrCat("manager #", uid)), std::string::npos) << status;
  NDArray copy = kept;
  kept = NDArray();
  EXPECT_EQ(copy.dtype(), DType::kFp16);
  copy = NDArray();
  // Another one destroyed the same way frees the first one's states (nothing to see but
  // under the sanitizers, which check that nothing is used after it is freed).
  std::thread([&] {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    kept = Must(ctx->Create({1}, DType::kFp32));
    EXPECT_TRUE(ctx->Close().ok());
  }).join();
  EXPECT_TRUE(IsFreedError(kept.Data().status()));
  kept = NDArray();
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, ThreadsCreatingInOneContextShareItsInlineStates) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<std::vector<NDArray>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) made[t].push_back(Must(ctx->Create({t + 1, i + 1}, DType::kFp32)));
    });
  }
  for (std::thread& thread : threads) thread.join();
  int inline_count = 0;
  for (const auto& arrays : made) {
    for (const NDArray& array : arrays) {
      inline_count += ctx->IsInlineState(array) ? 1 : 0;
      EXPECT_TRUE(ctx->Holds(array));
    }
  }
  EXPECT_EQ(inline_count, kInline);
  EXPECT_EQ(ctx->resource_count(), kThreads * kPerThread);
  ASSERT_TRUE(ctx->Close().ok());
  for (const auto& arrays : made) {
    for (const NDArray& array : arrays) EXPECT_TRUE(IsFreedError(array.Data().status()));
  }
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, ShapesPastTheQuickCountAreCountedExactly) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  for (int round = 0; round < 20; ++round) {  // states reused from earlier rounds' shapes
    ScopedManager ctx(Must(predictor->NewSubManager(ManagerLevel::kContext)));
    // Dims too large for the quick check whose product is still exact: empty arrays.
    NDArray empty = Must(ctx->Create({0, std::int64_t{1} << 40, std::int64_t{1} << 40},
                                     DType::kFp32));
    EXPECT_EQ(empty.num_elements(), 0);
    EXPECT_EQ(empty.shape(),
              (std::vector<std::int64_t>{0, std::int64_t{1} << 40, std::int64_t{1} << 40}));
    const absl::StatusOr<NDArray> overflow = ctx->Create(
        {std::int64_t{1} << 21, std::int64_t{1} << 21, std::int64_t{1} << 21}, DType::kFp32);
    EXPECT_TRUE(absl::IsInvalidArgument(overflow.status())) << overflow.status();
    // Past the inline dims, then a small shape in a state that had a long one.
    NDArray long_shape = Must(ctx->Create({1, 1, 2, 1, 1, 1, 3}, DType::kFp32));
    EXPECT_EQ(long_shape.num_elements(), 6);
    EXPECT_EQ(long_shape.rank(), 7);
    NDArray small = Must(ctx->Create({round + 2, 5}, DType::kInt8));
    EXPECT_EQ(small.shape(), (std::vector<std::int64_t>{round + 2, 5}));
    EXPECT_EQ(small.num_elements(), (round + 2) * 5);
  }
  EXPECT_EQ(AllocatedBytes(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerInlineTest, LeakTrackingNamesTheContextOfAnInlineArray) {
  MemoryConfig config;
  config.debug_level = 1;
  MemorySystem tracked(config);
  Pool& pool = *Must(tracked.GetPool(Device::Cpu()));
  std::shared_ptr<NDManager> predictor =
      Must(tracked.NewBaseManager(Device::Cpu(), ManagerLevel::kPredictor, "p"));
  ScopedManager ctx(Must(predictor->NewSubManager(ManagerLevel::kContext, "ctx/9")));
  NDArray x = Must(ctx->Create({100}, DType::kFp32, "logits"));
  ASSERT_TRUE(ctx->IsInlineState(x));
  bool found = false;
  for (const OutstandingAllocation& a : pool.Outstanding()) {
    if (a.address == reinterpret_cast<std::uintptr_t>(*x.Data())) {
      found = true;
      EXPECT_EQ(a.owner, "ctx/9 'logits'");
    }
  }
  EXPECT_TRUE(found);
  ctx.Reset();
  EXPECT_TRUE(pool.Outstanding().empty());
  ASSERT_TRUE(predictor->Close().ok());
}

}  // namespace
}  // namespace ndserve
