// The scope rules of NDManager/NDArray (docs/design.md §2), one test per rule.
#include "memory/nd_manager.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::IsFreedError;
using testing_util::Must;

// Each test's managers hang under a memory system of its own (ScopeTest::memory_).
class NDManagerTest : public testing_util::ScopeTest {};

TEST_F(NDManagerTest, SystemManagerIsAPerDeviceSingletonThatRefusesClose) {
  std::shared_ptr<NDManager> a = System();
  std::shared_ptr<NDManager> b = System();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(a->is_system());
  EXPECT_EQ(a->level(), ManagerLevel::kSystem);
  absl::Status closed = a->Close();
  EXPECT_TRUE(absl::IsFailedPrecondition(closed)) << closed;
  EXPECT_FALSE(a->closed());
  // Still usable afterwards.
  NDArray x = Must(a->Create({4}, DType::kFp32));
  EXPECT_TRUE(x.valid());
  EXPECT_TRUE(NDManager::UnsafeFree(x).ok());
}

TEST_F(NDManagerTest, BaseManagersHangUnderTheSystemManager) {
  std::shared_ptr<NDManager> system = System();
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  EXPECT_EQ(model->parent(), system);
  EXPECT_EQ(model->device(), Device::Cpu());
  EXPECT_EQ(model->pool(), system->pool());
  EXPECT_EQ(model->name(), absl::StrCat("model/", model->uid()));
  std::shared_ptr<NDManager> named = Base(ManagerLevel::kPredictor, "resnet-predictor");
  EXPECT_EQ(named->name(), "resnet-predictor");
  EXPECT_GT(named->uid(), model->uid());
  EXPECT_TRUE(absl::IsInvalidArgument(
      memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kSystem).status()));
  EXPECT_TRUE(model->Close().ok());
  EXPECT_TRUE(named->Close().ok());
}

TEST_F(NDManagerTest, CreateZerosFromHostAndToHost) {
  ScopedManager ctx(Base(ManagerLevel::kContext));
  NDArray a = Must(ctx->Create({2, 3}, DType::kFp32, "a"));
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(a.num_elements(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  EXPECT_EQ(a.dtype(), DType::kFp32);
  EXPECT_EQ(a.device(), Device::Cpu());
  EXPECT_EQ(a.name(), "a");
  EXPECT_EQ(a.DebugString(), "'a' FP32[2,3] on cpu:0");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*a.Data()) % 256, 0u);

  NDArray z = Must(ctx->Zeros({5}, DType::kInt64));
  EXPECT_EQ(Must(z.ToVector<std::int64_t>()), std::vector<std::int64_t>(5, 0));

  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  NDArray h = Must(ctx->FromHostValues<float>({3, 2}, values));
  EXPECT_EQ(Must(h.ToVector<float>()), values);
  float* data = Must(h.DataAs<float>());
  data[0] = 42;
  EXPECT_EQ(Must(h.ToVector<float>())[0], 42);
  EXPECT_TRUE(absl::IsInvalidArgument(h.DataAs<double>().status()));

  const std::vector<std::uint8_t> bytes = {1, 0, 1};
  NDArray flags = Must(ctx->FromHost({3}, DType::kBool, bytes));
  EXPECT_EQ(Must(flags.ToHost()), bytes);

  NDArray empty = Must(ctx->Create({0, 7}, DType::kFp16));
  EXPECT_EQ(empty.nbytes(), 0u);
  EXPECT_TRUE(empty.valid());
  EXPECT_TRUE(Must(empty.ToHost()).empty());
  EXPECT_EQ(ctx->resource_count(), 5);
  EXPECT_EQ(ctx->bytes(), 24u + 40u + 24u + 3u);
}

TEST_F(NDManagerTest, CreateRejectsBadArguments) {
  ScopedManager ctx(Base(ManagerLevel::kContext));
  EXPECT_TRUE(absl::IsInvalidArgument(ctx->Create({2, -1}, DType::kFp32).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ctx->Create({2}, DType::kBytes).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ctx->Create({INT64_MAX, INT64_MAX}, DType::kFp32).status()));
  const std::vector<std::uint8_t> three(3);
  EXPECT_TRUE(absl::IsInvalidArgument(ctx->FromHost({2}, DType::kFp32, three).status()));
  EXPECT_EQ(ctx->resource_count(), 0);
}

TEST_F(NDManagerTest, HandlesAreCheapCopiesOfOneArray) {
  const std::uint64_t baseline = AllocatedBytes();
  ScopedManager ctx(Base(ManagerLevel::kContext));
  NDArray a = Must(ctx->Create({8}, DType::kUint8));
  NDArray b = a;
  EXPECT_TRUE(b.SameArray(a));
  b.set_name("renamed");
  EXPECT_EQ(a.name(), "renamed");
  NDArray null;
  EXPECT_FALSE(null.valid());
  EXPECT_TRUE(null.is_null());
  EXPECT_TRUE(absl::IsFailedPrecondition(null.Data().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(ctx->Attach(null)));
  // Dropping every handle does not free the array: the manager owns it.
  const std::uint64_t before = AllocatedBytes();
  { NDArray dropped = Must(ctx->Create({1024}, DType::kFp32)); }
  EXPECT_GT(AllocatedBytes(), before);
  EXPECT_EQ(ctx->resource_count(), 2);
  ctx.Reset();
  EXPECT_EQ(AllocatedBytes(), baseline);
  EXPECT_FALSE(b.valid());
}

TEST_F(NDManagerTest, CloseFreesArraysAndIsIdempotent) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  NDArray a = Must(ctx->Create({256}, DType::kFp32, "a"));
  NDArray b = Must(ctx->Zeros({3, 3}, DType::kInt32));
  EXPECT_GT(AllocatedBytes(), baseline);
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_TRUE(ctx->closed());
  EXPECT_EQ(AllocatedBytes(), baseline);
  EXPECT_EQ(ctx->resource_count(), 0);
  EXPECT_TRUE(ctx->Close().ok());  // idempotent

  // Every memory access is an error; metadata stays readable.
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(IsFreedError(a.Data().status())) << a.Data().status();
  EXPECT_TRUE(IsFreedError(a.ToHost().status()));
  EXPECT_TRUE(IsFreedError(b.ToVector<std::int32_t>().status()));
  std::vector<std::uint8_t> buffer(a.nbytes());
  EXPECT_TRUE(IsFreedError(a.CopyFromHost(buffer)));
  EXPECT_TRUE(IsFreedError(a.CopyToHost(absl::MakeSpan(buffer))));
  EXPECT_NE(a.Data().status().message().find("'a' FP32[256]"), absl::string_view::npos);
  EXPECT_NE(a.Data().status().message().find(absl::StrCat("#", ctx->uid(), " (context) closed")),
            absl::string_view::npos)
      << a.Data().status();
  EXPECT_EQ(a.shape(), absl::Span<const std::int64_t>({256}));
  EXPECT_EQ(a.DebugString(), "'a' FP32[256] on cpu:0 (freed)");

  // A closed manager takes nothing new.
  absl::Status create = ctx->Create({1}, DType::kFp32).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(create));
  EXPECT_NE(create.message().find("is closed"), absl::string_view::npos);
  EXPECT_TRUE(absl::IsFailedPrecondition(ctx->NewSubManager().status()));
  EXPECT_TRUE(IsFreedError(NDManager::ManagerOf(a).status()));
  EXPECT_EQ(AllocatedBytes(), baseline);
}

TEST_F(NDManagerTest, ClosingAParentClosesItsChildren) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
  std::shared_ptr<NDManager> scratch = Must(ctx->NewSubManager());
  EXPECT_EQ(scratch->level(), ManagerLevel::kContext);
  EXPECT_EQ(scratch->parent(), ctx);
  EXPECT_EQ(predictor->child_count(), 1u);
  NDArray p = Must(predictor->Create({16}, DType::kFp32));
  NDArray c = Must(ctx->Create({16}, DType::kFp32));
  NDArray s = Must(scratch->Create({16}, DType::kFp32));
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_TRUE(ctx->closed());
  EXPECT_TRUE(scratch->closed());
  EXPECT_EQ(scratch->parent(), nullptr);  // a closed manager is out of the tree
  EXPECT_FALSE(p.valid());
  EXPECT_FALSE(c.valid());
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(AllocatedBytes(), baseline);
}

TEST_F(NDManagerTest, ClosingAChildTakesItOutOfTheTree) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::vector<std::shared_ptr<NDManager>> contexts;
  for (int i = 0; i < 5; ++i) {
    contexts.push_back(Must(predictor->NewSubManager(ManagerLevel::kContext)));
  }
  EXPECT_EQ(predictor->child_count(), 5u);
  // Out of order, so the parent's list is compacted from the middle.
  for (int i : {1, 4, 0, 3, 2}) {
    ASSERT_TRUE(contexts[i]->Close().ok());
    EXPECT_EQ(predictor->DebugInfo().children.size(), predictor->child_count());
  }
  EXPECT_EQ(predictor->child_count(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerTest, CloseThroughTheParentsLastReference) {
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  NDManager* raw = nullptr;
  NDArray x;
  {
    std::shared_ptr<NDManager> ctx = Must(predictor->NewSubManager(ManagerLevel::kContext));
    x = Must(ctx->Create({4}, DType::kFp32));
    raw = ctx.get();
  }
  // Only the predictor's list holds the context now; Close drops that reference last.
  ASSERT_TRUE(raw->Close().ok());
  EXPECT_FALSE(x.valid());
  EXPECT_EQ(predictor->child_count(), 0u);
  ASSERT_TRUE(predictor->Close().ok());
}

TEST_F(NDManagerTest, LeakReportsNameTheManager) {
  // Leak tracking is a setting of the memory system: this one tracks owners.
  MemoryConfig config;
  config.debug_level = 1;
  MemorySystem tracked(config);
  Pool& pool = *Must(tracked.GetPool(Device::Cpu()));
  ASSERT_EQ(pool.debug_level(), 1);
  ScopedManager ctx(
      Must(tracked.NewBaseManager(Device::Cpu(), ManagerLevel::kContext, "predictor-ctx/17")));
  NDArray x = Must(ctx->Create({1000}, DType::kFp32, "logits"));
  bool found = false;
  for (const OutstandingAllocation& a : pool.Outstanding()) {
    if (a.address == reinterpret_cast<std::uintptr_t>(*x.Data())) {
      found = true;
      EXPECT_EQ(a.owner, "predictor-ctx/17 'logits'");
    }
  }
  EXPECT_TRUE(found);
  EXPECT_NE(pool.MemoryStatus().find("predictor-ctx/17"), std::string::npos);
  // The test's own memory system tracks nothing.
  EXPECT_EQ(CpuPool().debug_level(), 0);
  EXPECT_TRUE(CpuPool().Outstanding().empty());
}

TEST_F(NDManagerTest, UnsafeFreeFreesNowAndLaterUseIsAnError) {
  const std::uint64_t before = AllocatedBytes();
  ScopedManager ctx(Base(ManagerLevel::kContext));
  NDArray a = Must(ctx->Create({1000}, DType::kFp64, "eager"));
  NDArray keep = Must(ctx->Create({10}, DType::kFp64));
  ASSERT_TRUE(NDManager::UnsafeFree(a).ok());
  EXPECT_EQ(ctx->resource_count(), 1);
  EXPECT_EQ(ctx->bytes(), keep.nbytes());
  EXPECT_FALSE(a.valid());
  absl::Status use = a.Data().status();
  EXPECT_TRUE(IsFreedError(use)) << use;
  EXPECT_NE(use.message().find("UnsafeFree"), absl::string_view::npos);
  EXPECT_TRUE(IsFreedError(NDManager::UnsafeFree(a)));  // not twice
  EXPECT_TRUE(IsFreedError(ctx->Attach(a)));
  EXPECT_TRUE(IsFreedError(ctx->TempAttachAll({a})));
  EXPECT_TRUE(keep.valid());
  ctx.Reset();
  EXPECT_EQ(AllocatedBytes(), before);
}

TEST_F(NDManagerTest, AttachMovesAnArrayForGood) {
  std::shared_ptr<NDManager> a = Base(ManagerLevel::kContext);
  std::shared_ptr<NDManager> b = Base(ManagerLevel::kContext);
  NDArray x = Must(a->Create({4}, DType::kFp32));
  ASSERT_TRUE(b->Attach(x).ok());
  EXPECT_TRUE(b->Holds(x));
  EXPECT_EQ(a->resource_count(), 0);
  EXPECT_EQ(b->resource_count(), 1);
  ASSERT_TRUE(a->Close().ok());
  EXPECT_TRUE(x.valid());
  ASSERT_TRUE(b->Attach(x).ok());  // already here: nothing changes
  ASSERT_TRUE(b->Close().ok());
  EXPECT_FALSE(x.valid());
}

TEST_F(NDManagerTest, TempAttachedArraysComeBackOnClose) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  NDArray w = Must(model->Zeros({8, 8}, DType::kFp32, "w"));
  NDArray b = Must(model->Zeros({8}, DType::kFp32, "b"));
  std::shared_ptr<NDManager> scope = Base(ManagerLevel::kContext);
  ASSERT_TRUE(scope->TempAttachAll({w, b}).ok());
  EXPECT_TRUE(scope->Holds(w));
  EXPECT_EQ(Must(NDManager::ResultScope(w)), scope);  // outputs of ops on w go to the scope
  EXPECT_EQ(model->resource_count(), 0);
  ASSERT_TRUE(scope->TempAttachAll({w}).ok());  // already held: skipped
  ASSERT_TRUE(scope->Close().ok());
  EXPECT_TRUE(w.valid());
  EXPECT_TRUE(b.valid());
  EXPECT_TRUE(model->Holds(w));
  EXPECT_TRUE(model->Holds(b));
  EXPECT_EQ(model->resource_count(), 2);
  EXPECT_EQ(model->bytes(), w.nbytes() + b.nbytes());
  ASSERT_TRUE(model->Close().ok());
  EXPECT_FALSE(w.valid());
}

TEST_F(NDManagerTest, TempAttachedArraysWhoseOwnerClosedFirstAreFreed) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  NDArray w = Must(model->Create({4096}, DType::kFp32, "w"));
  std::shared_ptr<NDManager> borrower = Base(ManagerLevel::kContext);
  ASSERT_TRUE(borrower->TempAttachAll({w}).ok());
  ASSERT_TRUE(model->Close().ok());
  EXPECT_TRUE(w.valid());  // the borrower still holds it
  EXPECT_GT(AllocatedBytes(), baseline);
  ASSERT_TRUE(borrower->Close().ok());
  EXPECT_FALSE(w.valid());
  EXPECT_TRUE(IsFreedError(w.Data().status()));
  EXPECT_EQ(AllocatedBytes(), baseline);  // freed, not leaked
}

TEST_F(NDManagerTest, ABorrowFromAClosedBorrowerGoesBackToTheHome) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  NDArray w = Must(model->Create({4}, DType::kFp32));
  std::shared_ptr<NDManager> first = Base(ManagerLevel::kContext);
  std::shared_ptr<NDManager> second = Base(ManagerLevel::kContext);
  ASSERT_TRUE(first->TempAttachAll({w}).ok());
  ASSERT_TRUE(second->TempAttachAll({w}).ok());  // taken from `first`
  ASSERT_TRUE(first->Close().ok());              // holds nothing now
  EXPECT_TRUE(second->Holds(w));
  ASSERT_TRUE(second->Close().ok());  // `first` is closed: home it goes
  EXPECT_TRUE(model->Holds(w));

  // Nested borrow, closed innermost first (the normal order in a tree).
  std::shared_ptr<NDManager> outer = Base(ManagerLevel::kContext);
  ASSERT_TRUE(outer->TempAttachAll({w}).ok());
  std::shared_ptr<NDManager> inner = Must(outer->NewSubManager());
  ASSERT_TRUE(inner->TempAttachAll({w}).ok());
  ASSERT_TRUE(inner->Close().ok());
  EXPECT_TRUE(outer->Holds(w));  // back to whom it was taken from
  ASSERT_TRUE(outer->Close().ok());
  EXPECT_TRUE(model->Holds(w));
  ASSERT_TRUE(model->Close().ok());
}

TEST_F(NDManagerTest, AttachEndsABorrow) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  NDArray w = Must(model->Create({4}, DType::kFp32));
  std::shared_ptr<NDManager> scope = Base(ManagerLevel::kContext);
  ASSERT_TRUE(scope->TempAttachAll({w}).ok());
  ASSERT_TRUE(scope->Attach(w).ok());
  ASSERT_TRUE(scope->Close().ok());
  EXPECT_FALSE(w.valid());  // it was the scope's for good
  ASSERT_TRUE(model->Close().ok());
}

TEST_F(NDManagerTest, RetSurvivesTheCloseOfTheScope) {
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  std::shared_ptr<NDManager> scratch = Must(ctx->NewSubManager());
  NDArray tmp = Must(scratch->Create({4}, DType::kFp32));
  NDArray result = Must(scratch->FromHostValues<float>({2}, {1.5f, 2.5f}));
  ASSERT_TRUE(scratch->Ret(result).ok());
  EXPECT_TRUE(ctx->Holds(result));
  ASSERT_TRUE(scratch->Close().ok());
  EXPECT_FALSE(tmp.valid());
  EXPECT_TRUE(result.valid());
  EXPECT_EQ(Must(result.ToVector<float>()), (std::vector<float>{1.5f, 2.5f}));
  // Ret only of what the manager holds.
  std::shared_ptr<NDManager> other = Must(ctx->NewSubManager());
  absl::Status not_held = other->Ret(result);
  EXPECT_TRUE(absl::IsFailedPrecondition(not_held)) << not_held;
  EXPECT_NE(not_held.message().find("does not hold"), absl::string_view::npos);
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_FALSE(result.valid());
  EXPECT_TRUE(IsFreedError(scratch->Ret(result)));
  std::shared_ptr<NDManager> system = System();
  NDArray root = Must(system->Create({1}, DType::kFp32));
  EXPECT_TRUE(absl::IsFailedPrecondition(system->Ret(root)));
  ASSERT_TRUE(NDManager::UnsafeFree(root).ok());
}

TEST_F(NDManagerTest, AttachingToACappedManagerFailsAndIsCounted) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel, "capped-model");
  NDArray w = Must(model->Create({4}, DType::kFp32));
  model->Cap();
  EXPECT_TRUE(model->capped());
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  NDArray x = Must(ctx->Create({4}, DType::kFp32));
  std::shared_ptr<NDManager> sub = Must(model->NewSubManager());  // sub-scopes are fine
  NDArray y = Must(sub->Create({4}, DType::kFp32));
  const std::int64_t before = memory_.LevelCounts()[ManagerLevel::kModel].cap_violations;
  const std::uint64_t allocated = AllocatedBytes();

  absl::Status create = model->Create({4}, DType::kFp32).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(create));
  EXPECT_NE(create.message().find("manager 'capped-model' is capped"), absl::string_view::npos)
      << create;
  EXPECT_TRUE(absl::IsFailedPrecondition(model->Zeros({4}, DType::kFp32).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(model->Attach(x)));
  EXPECT_TRUE(absl::IsFailedPrecondition(model->TempAttachAll({x})));
  EXPECT_TRUE(absl::IsFailedPrecondition(sub->Ret(y)));

  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kModel].cap_violations, before + 5);
  EXPECT_TRUE(ctx->Holds(x));  // refused moves change nothing
  EXPECT_TRUE(sub->Holds(y));
  EXPECT_EQ(model->resource_count(), 1);
  EXPECT_EQ(AllocatedBytes(), allocated);
  ASSERT_TRUE(ctx->Close().ok());
  ASSERT_TRUE(model->Close().ok());
  EXPECT_TRUE(sub->closed());
}

TEST_F(NDManagerTest, ABorrowedArrayReturnsToItsCappedOwner) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  NDArray w = Must(model->Create({4}, DType::kFp32));
  model->Cap();
  const std::int64_t before = memory_.LevelCounts()[ManagerLevel::kModel].cap_violations;
  std::shared_ptr<NDManager> ctx = Base(ManagerLevel::kContext);
  ASSERT_TRUE(ctx->TempAttachAll({w}).ok());  // taking out of a capped manager is fine
  ASSERT_TRUE(ctx->Close().ok());
  EXPECT_TRUE(model->Holds(w));
  EXPECT_TRUE(w.valid());
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kModel].cap_violations, before);
  ASSERT_TRUE(model->Close().ok());
}

TEST_F(NDManagerTest, SubManagerOfAndTheOperationRule) {
  ScopedManager ctx(Base(ManagerLevel::kContext));
  NDArray a = Must(ctx->Create({2}, DType::kFp32));
  NDArray b = Must(ctx->Create({2}, DType::kFp32));
  std::shared_ptr<NDManager> sub = Must(NDManager::SubManagerOf(a, "scratch"));
  EXPECT_EQ(sub->parent(), ctx.get());
  EXPECT_EQ(sub->level(), ManagerLevel::kContext);
  EXPECT_EQ(sub->name(), "scratch");
  ASSERT_TRUE(sub->Attach(b).ok());

  // DJL's rule follows the first input; an explicit scope ignores argument order.
  EXPECT_EQ(Must(NDManager::ResultScope(a)), ctx.get());
  EXPECT_EQ(Must(OutputScope::OfFirstInput().Resolve({a, b})), ctx.get());
  EXPECT_EQ(Must(OutputScope::OfFirstInput().Resolve({b, a})), sub);
  EXPECT_EQ(Must(OutputScope::In(ctx.get()).Resolve({b, a})), ctx.get());
  EXPECT_TRUE(OutputScope::In(sub).explicit_scope());
  EXPECT_TRUE(absl::IsInvalidArgument(OutputScope::OfFirstInput().Resolve({}).status()));
  ASSERT_TRUE(sub->Close().ok());
  EXPECT_TRUE(IsFreedError(OutputScope::OfFirstInput().Resolve({b}).status()));
  EXPECT_TRUE(IsFreedError(NDManager::SubManagerOf(b).status()));
}

TEST_F(NDManagerTest, LevelCountsFollowManagersAndArrays) {
  ASSERT_NE(System(), nullptr);  // made on first use
  const ManagerLevelSnapshot before = memory_.LevelCounts();
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> ctx1 = Must(predictor->NewSubManager(ManagerLevel::kContext));
  std::shared_ptr<NDManager> ctx2 = Must(predictor->NewSubManager(ManagerLevel::kContext));
  std::shared_ptr<NDManager> batch = Base(ManagerLevel::kBatch);
  NDArray w = Must(model->Create({100}, DType::kFp32));
  Must(ctx1->Create({10}, DType::kFp32));
  Must(ctx2->Create({10}, DType::kInt64));
  Must(ctx2->Create({3}, DType::kUint8));
  ASSERT_TRUE(ctx1->TempAttachAll({w}).ok());

  const ManagerLevelSnapshot during = memory_.LevelCounts();
  auto delta = [&](ManagerLevel level, auto field) {
    return during[level].*field - before[level].*field;
  };
  EXPECT_EQ(delta(ManagerLevel::kModel, &ManagerLevelCounts::live_managers), 1);
  EXPECT_EQ(delta(ManagerLevel::kPredictor, &ManagerLevelCounts::live_managers), 1);
  EXPECT_EQ(delta(ManagerLevel::kContext, &ManagerLevelCounts::live_managers), 2);
  EXPECT_EQ(delta(ManagerLevel::kBatch, &ManagerLevelCounts::live_managers), 1);
  EXPECT_EQ(delta(ManagerLevel::kModel, &ManagerLevelCounts::attached_resources), 0);  // lent
  EXPECT_EQ(delta(ManagerLevel::kContext, &ManagerLevelCounts::attached_resources), 4);
  EXPECT_EQ(delta(ManagerLevel::kContext, &ManagerLevelCounts::attached_bytes), 400 + 40 + 80 + 3);
  EXPECT_EQ(during[ManagerLevel::kSystem].live_managers, 1);  // one device in use

  ASSERT_TRUE(predictor->Close().ok());
  const ManagerLevelSnapshot after_predictor = memory_.LevelCounts();
  EXPECT_EQ(after_predictor[ManagerLevel::kContext].live_managers,
            before[ManagerLevel::kContext].live_managers);
  EXPECT_EQ(after_predictor[ManagerLevel::kModel].attached_resources -
                before[ManagerLevel::kModel].attached_resources,
            1);  // w went home
  ASSERT_TRUE(model->Close().ok());
  ASSERT_TRUE(batch->Close().ok());
  const ManagerLevelSnapshot after = memory_.LevelCounts();
  for (int i = 0; i < kNumManagerLevels; ++i) {
    EXPECT_EQ(after.levels[i].live_managers, before.levels[i].live_managers) << i;
    EXPECT_EQ(after.levels[i].attached_resources, before.levels[i].attached_resources) << i;
    EXPECT_EQ(after.levels[i].attached_bytes, before.levels[i].attached_bytes) << i;
  }
}

TEST_F(NDManagerTest, DebugDumpShowsTheTree) {
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel, "bert");
  Must(model->Create({256}, DType::kFp32));
  model->Cap();
  std::shared_ptr<NDManager> sub = Must(model->NewSubManager(ManagerLevel::kContext));
  Must(sub->Create({2}, DType::kInt64));
  Must(sub->Create({2}, DType::kInt64));

  const std::string dump = model->DebugDump();
  EXPECT_EQ(dump, absl::StrCat("bert (uid=", model->uid(),
                               " level=model device=cpu:0 capped) resources=1 bytes=1024\n",
                               "  context/", sub->uid(), " (uid=", sub->uid(),
                               " level=context device=cpu:0) resources=2 bytes=32\n"));
  const ManagerNodeInfo info = model->DebugInfo();
  EXPECT_EQ(info.name, "bert");
  EXPECT_TRUE(info.capped);
  ASSERT_EQ(info.children.size(), 1u);
  EXPECT_EQ(info.children[0].uid, sub->uid());
  EXPECT_EQ(info.children[0].resource_count, 2);
  EXPECT_NE(memory_.DebugDumpAll().find("  bert (uid="), std::string::npos);
  ASSERT_TRUE(model->Close().ok());
  EXPECT_EQ(memory_.DebugDumpAll().find("bert"), std::string::npos);
}

TEST_F(NDManagerTest, AnUnclosedManagerStaysInTheTreeUntilItsParentCloses) {
  const std::uint64_t baseline = AllocatedBytes();
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  NDArray leaked;
  {
    std::shared_ptr<NDManager> forgotten = Must(predictor->NewSubManager(ManagerLevel::kContext));
    leaked = Must(forgotten->Create({64}, DType::kFp32));
  }  // the handle is gone, the scope is not: it shows in the dump
  EXPECT_EQ(predictor->child_count(), 1u);
  EXPECT_NE(predictor->DebugDump().find("resources=1 bytes=256"), std::string::npos);
  EXPECT_TRUE(leaked.valid());
  ASSERT_TRUE(predictor->Close().ok());
  EXPECT_FALSE(leaked.valid());
  EXPECT_EQ(AllocatedBytes(), baseline);
}

TEST_F(NDManagerTest, ScopedManagerClosesOnScopeExit) {
  NDArray x;
  std::shared_ptr<NDManager> seen;
  {
    ScopedManager ctx(Base(ManagerLevel::kContext));
    x = Must(ctx->Create({4}, DType::kFp32));
    seen = ctx.get();
  }
  EXPECT_TRUE(seen->closed());
  EXPECT_FALSE(x.valid());
}

// The brief's end-of-life rule: once every manager but the system ones is closed, the
// pool holds nothing, whatever moved between them on the way.
TEST_F(NDManagerTest, AfterClosingEverythingButTheSystemManagersThePoolIsEmpty) {
  std::shared_ptr<NDManager> system = System();
  ASSERT_EQ(system->resource_count(), 0);
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel);
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
  std::shared_ptr<NDManager> trainer = Base(ManagerLevel::kTrainer);
  NDArray w = Must(model->Create({1 << 12}, DType::kFp32));
  NDArray bias = Must(model->Zeros({64}, DType::kFp32));
  model->Cap();
  predictor->Cap();
  for (int request = 0; request < 50; ++request) {
    ScopedManager ctx(Must(predictor->NewSubManager(ManagerLevel::kContext)));
    NDArray in = Must(ctx->Create({request + 1, 64}, DType::kFp32));
    std::shared_ptr<NDManager> scratch = Must(NDManager::SubManagerOf(in));
    ASSERT_TRUE(scratch->TempAttachAll({w, bias}).ok());
    NDArray out = Must(scratch->Create({request + 1, 16}, DType::kFp32));
    Must(scratch->Create({7}, DType::kInt8));
    ASSERT_TRUE(scratch->Ret(out).ok());
    if (request % 3 == 0) ASSERT_TRUE(NDManager::UnsafeFree(in).ok());
    if (request % 5 == 0) continue;  // let the context close the scratch scope
    ASSERT_TRUE(scratch->Close().ok());
  }
  std::shared_ptr<NDManager> batch = Must(trainer->NewSubManager(ManagerLevel::kBatch));
  NDArray grad = Must(batch->Create({1 << 10}, DType::kFp32));
  ASSERT_TRUE(trainer->TempAttachAll({w}).ok());  // w's owner will close first
  ASSERT_TRUE(trainer->Attach(grad).ok());
  ASSERT_TRUE(model->Close().ok());
  ASSERT_TRUE(predictor->Close().ok());
  ASSERT_TRUE(trainer->Close().ok());

  EXPECT_EQ(system->resource_count(), 0);
  EXPECT_EQ(system->child_count(), 0u) << memory_.DebugDumpAll();
  const PoolStats stats = CpuPool().Stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.outstanding_allocations, 0u);
}

}  // namespace
}  // namespace ndserve
