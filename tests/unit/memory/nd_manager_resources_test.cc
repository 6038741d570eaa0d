// How a manager keeps its arrays (an intrusive list through the array states, walked
// once by Close, which frees in batches) and how array states are recycled: the paths
// the request scope's speed depends on (docs/design.md §2, "What a request scope
// costs"), checked for what they must keep exact.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::IsFreedError;
using testing_util::Must;

class NDManagerResourcesTest : public testing_util::ScopeTest {};

// Arrays leave the middle, the head and the tail of the list (UnsafeFree, Attach, Ret);
// the counts and bytes follow, and Close frees exactly what is still listed.
TEST_F(NDManagerResourcesTest, ArraysLeaveTheListFromAnyPlace) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> other = Base(ManagerLevel::kContext);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  std::vector<NDArray> arrays;
  for (int i = 0; i < 5; ++i) {
    arrays.push_back(Must(ctx->Create({i + 1}, DType::kFp32, absl::StrCat("a", i))));
  }
  EXPECT_EQ(ctx->resource_count(), 5);
  EXPECT_EQ(ctx->bytes(), 4u * (1 + 2 + 3 + 4 + 5));

  ASSERT_TRUE(NDManager::UnsafeFree(arrays[2]).ok());  // the middle
  ASSERT_TRUE(other->Attach(arrays[4]).ok());          // the newest: the list's head
  ASSERT_TRUE(ctx->Ret(arrays[0]).ok());               // the oldest: its tail
  EXPECT_EQ(ctx->resource_count(), 2);
  EXPECT_EQ(ctx->bytes(), 4u * (2 + 4));
  EXPECT_TRUE(ctx->Holds(arrays[1]));
  EXPECT_TRUE(ctx->Holds(arrays[3]));
  EXPECT_TRUE(other->Holds(arrays[4]));
  EXPECT_TRUE(predictor->Holds(arrays[0]));

  // A new array after the removals links in front of what is left.
  NDArray late = Must(ctx->Create({7}, DType::kFp32));
  EXPECT_EQ(ctx->resource_count(), 3);
  ASSERT_TRUE(ctx->Close().ok());
  for (int i : {1, 3}) EXPECT_TRUE(IsFreedError(arrays[i].Data().status())) << i;
  EXPECT_TRUE(IsFreedError(late.Data().status()));
  EXPECT_TRUE(arrays[0].valid());
  EXPECT_TRUE(arrays[4].valid());
  EXPECT_EQ(predictor->resource_count(), 1);
  EXPECT_EQ(other->resource_count(), 1);

  ASSERT_TRUE(other->Close().ok());
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_FALSE(arrays[0].valid());
  EXPECT_FALSE(arrays[4].valid());
  EXPECT_EQ(AllocatedBytes(), baseline);
}

// More arrays than one batch of blocks: Close frees every one of them, whichever
// handles are still held, and the pool's counters come back exactly.
TEST_F(NDManagerResourcesTest, CloseFreesManyBatchesExactly) {
  const PoolStats before = CpuPool().Stats();
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  std::vector<NDArray> held;
  for (int i = 0; i < 100; ++i) {
    NDArray a = Must(ctx->Create({(i % 7) * 100 + 1}, DType::kFp32));
    if (i % 3 != 0) held.push_back(a);  // the others' handles are dropped at once
  }
  EXPECT_EQ(ctx->resource_count(), 100);
  EXPECT_EQ(CpuPool().Stats().outstanding_allocations, before.outstanding_allocations + 100);
  ASSERT_TRUE(ctx->Close().ok());
  const PoolStats after = CpuPool().Stats();
  EXPECT_EQ(after.outstanding_allocations, before.outstanding_allocations);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.requested_bytes, before.requested_bytes);
  EXPECT_EQ(after.free_count - before.free_count, 100u);
  for (const NDArray& a : held) EXPECT_FALSE(a.valid());
}

// A recycled array state starts clean: no name, shape, freed mark or owner of the array
// it held before.
TEST_F(NDManagerResourcesTest, ARecycledStateCarriesNothingOver) {
  std::shared_ptr<NDManager> first = Base(ManagerLevel::kContext);
  {
    NDArray named = Must(first->Create({1, 2, 3, 4, 5, 6, 7, 8}, DType::kInt64,
                                       std::string(100, 'n')));  // a heap name and shape
    NDArray plain = Must(first->Create({3}, DType::kFp32));
    ASSERT_TRUE(first->Close().ok());
  }  // both states go back to this thread's cache
  std::shared_ptr<NDManager> second = Base(ManagerLevel::kContext);
  for (int i = 0; i < 4; ++i) {
    NDArray a = Must(second->Create({2, 2}, DType::kFp16));
    EXPECT_EQ(a.name(), "");
    EXPECT_EQ(a.shape(), absl::Span<const std::int64_t>({2, 2}));
    EXPECT_EQ(a.dtype(), DType::kFp16);
    EXPECT_TRUE(a.valid());
    EXPECT_TRUE(second->Holds(a));
    EXPECT_TRUE(a.Data().ok());
  }
  ASSERT_TRUE(second->Close().ok());
}

// A refused Create (closed or capped manager, or the pool out of memory) leaves
// nothing behind: no block, no listed array, and the next Create works.
TEST_F(NDManagerResourcesTest, RefusedCreatesLeaveNothingBehind) {
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = 1 << 20;
  MemorySystem limited(config);
  Pool& pool = *Must(limited.GetPool(Device::Cpu()));
  std::shared_ptr<NDManager> ctx =
      Must(limited.NewBaseManager(Device::Cpu(), ManagerLevel::kContext));
  absl::Status oom = ctx->Create({4 << 20}, DType::kFp32, "too big").status();
  EXPECT_TRUE(absl::IsResourceExhausted(oom)) << oom;
  EXPECT_EQ(ctx->resource_count(), 0);
  EXPECT_EQ(pool.Stats().outstanding_allocations, 0u);
  NDArray fits = Must(ctx->Create({16}, DType::kFp32));
  EXPECT_EQ(fits.name(), "");
  EXPECT_EQ(ctx->resource_count(), 1);

  ctx->Cap();
  EXPECT_TRUE(absl::IsFailedPrecondition(ctx->Create({16}, DType::kFp32, "refused").status()));
  EXPECT_EQ(ctx->resource_count(), 1);
  EXPECT_EQ(pool.Stats().outstanding_allocations, 1u);
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_EQ(pool.Stats().outstanding_allocations, 0u);
}


// Create checks the dims while it copies them into the array state: a bad shape, on
// the inline or the heap path, is INVALID_ARGUMENT naming it, takes no block, lists
// nothing, and the state it had taken serves the next Create cleanly.
TEST_F(NDManagerResourcesTest, BadShapesGiveTheirStateBack) {
  const PoolStats before = CpuPool().Stats();
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  struct Case {
    std::vector<std::int64_t> shape;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{2, -1}, "invalid shape [2,-1] for a new array"},
      {{1, 2, 3, 4, 5, 6, -7}, "invalid shape [1,2,3,4,5,6,-7] for a new array"},
      {{-1, 0}, "invalid shape [-1,0] for a new array"},  // a zero after it hides nothing
      {{int64_t{1} << 40, int64_t{1} << 40}, "invalid shape"},  // count past int64
      {{int64_t{1} << 62}, "overflows size_t"},                 // bytes past size_t
  };
  for (const Case& c : cases) {
    absl::Status status = ctx->Create(c.shape, DType::kFp32).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_NE(status.message().find(c.message), absl::string_view::npos) << status;
    EXPECT_EQ(ctx->resource_count(), 0);
  }
  EXPECT_EQ(CpuPool().Stats().outstanding_allocations, before.outstanding_allocations);
  NDArray a = Must(ctx->Create({2, 3}, DType::kFp32));
  EXPECT_EQ(a.shape(), absl::Span<const std::int64_t>({2, 3}));
  EXPECT_EQ(a.num_elements(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  NDArray empty = Must(ctx->Create({4, 0}, DType::kFp32));
  EXPECT_EQ(empty.num_elements(), 0);
  EXPECT_EQ(ctx->resource_count(), 2);
  ASSERT_TRUE(ctx->Close().ok());
}

// What freed an array is one packed word in its state; the error names the closing
// manager's uid and level, or UnsafeFree, and a recycled state forgets it.
TEST_F(NDManagerResourcesTest, FreedErrorsNameWhatFreedTheArray) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  NDArray closed = Must(ctx->Create({4}, DType::kFp32));
  NDArray unsafe = Must(ctx->Create({4}, DType::kFp32));
  ASSERT_TRUE(NDManager::UnsafeFree(unsafe).ok());
  ASSERT_TRUE(ctx->Close().ok());
  const absl::Status by_close = closed.Data().status();
  EXPECT_NE(by_close.message().find(
                absl::StrCat("freed when its manager #", ctx->uid(), " (context) closed")),
            absl::string_view::npos)
      << by_close;
  const absl::Status by_unsafe = unsafe.Data().status();
  EXPECT_NE(by_unsafe.message().find("freed by UnsafeFree"), absl::string_view::npos)
      << by_unsafe;
  closed = NDArray();
  unsafe = NDArray();  // both states back in the cache
  std::shared_ptr<NDManager> next = Must(predictor->NewSubManager(ManagerLevel::kContext));
  NDArray fresh = Must(next->Create({4}, DType::kFp32));
  EXPECT_TRUE(fresh.valid());
  EXPECT_EQ(fresh.DebugString().find("freed"), std::string::npos) << fresh.DebugString();
  ASSERT_TRUE(next->Close().ok());
  ASSERT_TRUE(predictor->Close().ok());
}

}  // namespace
}  // namespace ndserve
