// Pool::Layout and MemorySnapshot: every pool kind reports its segments and blocks, the
// snapshot's states add up to the pool's counters, and each live block names the
// manager that holds it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "memory/memory_config.h"
#include "memory/memory_snapshot.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "memory/pool_layout.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::Must;

const PoolSnapshot* CpuPoolOf(const MemorySnapshot& snapshot) {
  for (const PoolSnapshot& p : snapshot.pools) {
    if (p.device == Device::Cpu()) return &p;
  }
  return nullptr;
}

class MemorySnapshotTest : public ::testing::TestWithParam<PoolKind> {
 protected:
  MemorySnapshotTest() : memory_(MemoryConfig{.pool = GetParam()}) {}

  NDArray Fp32(NDManager& manager, std::int64_t n, absl::string_view name) {
    const std::int64_t shape[] = {n};
    return Must(manager.Create(shape, DType::kFp32, name));
  }

  MemorySystem memory_;
};

TEST_P(MemorySnapshotTest, StatesAddUpToThePoolAndLiveBlocksNameTheirManager) {
  std::shared_ptr<NDManager> model =
      Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/m:1"));
  const NDArray small = Fp32(*model, 256, "small");        // 1 KiB
  const NDArray large = Fp32(*model, 1 << 20, "large");    // 4 MiB
  const NDArray tiny = Fp32(*model, 16, "tiny");
  {
    // Freed blocks: cached (or, for the none pool, back on the device).
    ScopedManager scratch(Must(model->NewSubManager(ManagerLevel::kContext, "scratch")));
    Fp32(*scratch, 512, "gone");
    Fp32(*scratch, 3 << 18, "gone too");
  }
  std::shared_ptr<NDManager> other =
      Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kPredictor, "predictor/x"));
  const NDArray held = Fp32(*other, 100, "held");

  const MemorySnapshot snapshot = TakeMemorySnapshot(memory_);
  const PoolSnapshot* pool = CpuPoolOf(snapshot);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->pool, PoolKindName(GetParam()));

  std::uint64_t allocated = 0, free = 0, reserved = 0;
  int owned_by_model = 0, owned_by_other = 0;
  std::uintptr_t previous_end = 0;
  for (const SnapshotSegment& segment : pool->segments) {
    EXPECT_GE(segment.address, previous_end) << "segments overlap or are out of order";
    previous_end = segment.address + segment.bytes;
    reserved += segment.bytes;
    std::uint64_t offset = 0;
    ASSERT_FALSE(segment.blocks.empty());
    for (const SnapshotBlock& block : segment.blocks) {
      EXPECT_EQ(block.offset, offset) << "blocks must tile their segment";
      offset += block.bytes;
      EXPECT_EQ(block.stream, 0);
      if (block.state == BlockState::kAllocated) {
        allocated += block.bytes;
        if (block.model == "model/m:1") {
          ++owned_by_model;
          ASSERT_FALSE(snapshot.managers.empty());
          EXPECT_EQ(block.owner, snapshot.managers[0].name + " > model/m:1") << block.array;
          EXPECT_EQ(block.owner_uid, model->uid());
        } else if (block.owner.find("predictor/x") != std::string::npos) {
          ++owned_by_other;
          EXPECT_EQ(block.array, "held");
          EXPECT_EQ(block.model, "");
          EXPECT_EQ(block.requested, 400u);
        }
      } else {
        EXPECT_TRUE(block.owner.empty());
        free += block.bytes;
      }
    }
    EXPECT_EQ(offset, segment.bytes);
  }
  EXPECT_EQ(owned_by_model, 3);
  EXPECT_EQ(owned_by_other, 1);
  EXPECT_EQ(allocated, pool->stats.allocated_bytes);
  EXPECT_EQ(free, pool->stats.cached_bytes);
  EXPECT_EQ(reserved, pool->stats.reserved_bytes);
  if (GetParam() != PoolKind::kNone) EXPECT_GT(free, 0u);

  // The manager trees come along for the icicle, with their blocks.
  ASSERT_EQ(snapshot.managers.size(), 1u);
  EXPECT_EQ(snapshot.managers[0].children.size(), 2u);
}

TEST_P(MemorySnapshotTest, LayoutAloneListsWhatThePoolKeeps) {
  Pool* pool = Must(memory_.GetPool(Device::Cpu()));
  absl::StatusOr<Block> a = pool->Allocate(4096);
  absl::StatusOr<Block> b = pool->Allocate(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  pool->Free(*a);
  const PoolLayout layout = pool->Layout();
  EXPECT_EQ(layout.device, Device::Cpu());
  std::uint64_t cached = 0, allocated = 0;
  for (const LayoutSegment& s : layout.segments) {
    for (const LayoutBlock& block : s.blocks) {
      (block.state == BlockState::kAllocated ? allocated : cached) += block.bytes;
    }
  }
  const PoolStats stats = pool->Stats();
  EXPECT_EQ(cached, stats.cached_bytes);
  EXPECT_EQ(layout.lists_allocated, GetParam() == PoolKind::kSplit);
  EXPECT_EQ(allocated, layout.lists_allocated ? stats.allocated_bytes : 0u);
  pool->Free(*b);
}

INSTANTIATE_TEST_SUITE_P(Pools, MemorySnapshotTest,
                         ::testing::Values(PoolKind::kBinned, PoolKind::kSplit, PoolKind::kSimple,
                                           PoolKind::kNone),
                         [](const ::testing::TestParamInfo<PoolKind>& info) {
                           return std::string(PoolKindName(info.param));
                         });

// The split pool's fragmentation state: a free piece next to a live block is
// inactive-split; once the segment is wholly free it is cached.
TEST(SplitPoolLayoutTest, FreePieceBesideALiveBlockIsInactiveSplit) {
  MemorySystem memory(MemoryConfig{.pool = PoolKind::kSplit});
  Pool* pool = Must(memory.GetPool(Device::Cpu()));
  Block first = Must(pool->Allocate(1024));
  Block second = Must(pool->Allocate(1024));
  pool->Free(first);

  auto states = [&] {
    std::vector<std::pair<BlockState, std::uint64_t>> out;
    const PoolLayout layout = pool->Layout();
    EXPECT_EQ(layout.segments.size(), 1u);
    for (const LayoutSegment& s : layout.segments) {
      EXPECT_EQ(s.bytes, 2u << 20);
      for (const LayoutBlock& b : s.blocks) out.push_back({b.state, b.bytes});
    }
    return out;
  };
  using P = std::pair<BlockState, std::uint64_t>;
  EXPECT_EQ(states(), (std::vector<P>{{BlockState::kInactiveSplit, 1024},
                                      {BlockState::kAllocated, 1024},
                                      {BlockState::kInactiveSplit, (2u << 20) - 2048}}));
  EXPECT_EQ(pool->Stats().inactive_split_bytes, (2u << 20) - 1024);
  pool->Free(second);
  EXPECT_EQ(states(), (std::vector<P>{{BlockState::kCached, 2u << 20}}));
  EXPECT_EQ(BlockStateName(BlockState::kInactiveSplit), "inactive_split");
}

}  // namespace
}  // namespace ndserve
