#include "server/memory_map_page.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/admin.pb.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

admin::v1::SnapshotBlock* AddBlock(admin::v1::SnapshotSegment* segment, std::uint64_t offset,
                                   std::uint64_t bytes, const std::string& state,
                                   const std::string& model = {}) {
  admin::v1::SnapshotBlock* b = segment->add_blocks();
  b->set_offset(offset);
  b->set_bytes(bytes);
  b->set_state(state);
  if (!model.empty()) {
    b->set_owner("system/1 > " + model);
    b->set_owner_uid("7");
    b->set_model(model);
    b->set_array("weights");
    b->set_requested_bytes(bytes - 10);
  }
  return b;
}

// One pool with two segments: a model's block and an inactive split in the first, a
// cached block and a block no manager holds in the second; a manager tree with the model
// under a system manager. The model's name carries markup, which must not reach the page.
admin::v1::MemorySnapshot Sample() {
  admin::v1::MemorySnapshot s;
  admin::v1::PoolSnapshot* pool = s.add_pools();
  pool->mutable_status()->set_device("cpu:0");
  pool->mutable_status()->set_pool("split");
  pool->mutable_status()->set_allocated_bytes(3072);
  pool->mutable_status()->set_cached_bytes(2048);
  admin::v1::SnapshotSegment* first = pool->add_segments();
  first->set_address(0x10000);
  first->set_bytes(2048);
  AddBlock(first, 0, 1024, "allocated", "model/<b>&x:1");
  AddBlock(first, 1024, 1024, "inactive_split");
  admin::v1::SnapshotSegment* second = pool->add_segments();
  second->set_address(0x20000);
  second->set_bytes(3072);
  AddBlock(second, 0, 1024, "cached");
  AddBlock(second, 1024, 2048, "allocated");

  admin::v1::ManagerNode* root = s.mutable_root();
  root->set_name("process");
  admin::v1::ManagerNode* system = root->add_children();
  system->set_name("system/1");
  admin::v1::ManagerNode* model = system->add_children();
  model->set_name("model/<b>&x:1");
  model->set_block_bytes(1024);
  admin::v1::ManagerNode* empty = system->add_children();
  empty->set_name("model/empty:1");
  return s;
}

TEST(MemoryMapPageTest, OneRectPerBlockColouredByOwnerOrState) {
  const std::string page = RenderMemoryMapPage(Sample());
  EXPECT_TRUE(absl::StartsWith(page, "<!DOCTYPE html>"));
  EXPECT_EQ(CountOf(page, "<rect class=\"block\""), 4);
  EXPECT_THAT(page, HasSubstr("data-blocks=\"4\""));
  EXPECT_EQ(CountOf(page, "<g class=\"segment\""), 2);
  // The first model in name order takes the palette's first colour, in the bar, the
  // legend and the icicle; free blocks take their state's colour.
  EXPECT_EQ(CountOf(page, "fill=\"#4e79a7\""), 2);  // its block and its icicle node
  EXPECT_THAT(page, HasSubstr("fill=\"#f4a6a6\" data-state=\"inactive_split\""));
  EXPECT_THAT(page, HasSubstr("fill=\"#d9d9d9\" data-state=\"cached\""));
  EXPECT_THAT(page, HasSubstr("fill=\"#4d4d4d\" data-state=\"allocated\" data-model=\"\""));
  // Tooltips name the address, owner and array.
  EXPECT_THAT(page, HasSubstr("0x10000 (+0) 1.000 KiB, allocated"));
  EXPECT_THAT(page, HasSubstr("array: weights"));
  EXPECT_THAT(page, HasSubstr("owner: none (allocated on the pool directly)"));
}

TEST(MemoryMapPageTest, NamesAreEscapedAndNothingIsFetched) {
  const std::string page = RenderMemoryMapPage(Sample());
  EXPECT_THAT(page, Not(HasSubstr("<b>&x")));
  EXPECT_THAT(page, HasSubstr("model/&lt;b&gt;&amp;x:1"));
  EXPECT_THAT(page, Not(HasSubstr("<script")));
  EXPECT_THAT(page, Not(HasSubstr("src=")));
  EXPECT_THAT(page, Not(HasSubstr("href=")));
  EXPECT_THAT(page, Not(HasSubstr("@import")));
  EXPECT_THAT(page, Not(HasSubstr("url(")));
}

TEST(MemoryMapPageTest, IcicleDrawsOnlyManagersThatHoldBytes) {
  const std::string page = RenderMemoryMapPage(Sample());
  // process, system/1 and the model; the empty model manager takes no width.
  EXPECT_EQ(CountOf(page, "<g class=\"manager\""), 3);
  EXPECT_THAT(page, Not(HasSubstr("model/empty:1")));
}

TEST(MemoryMapPageTest, EmptySnapshotStillRenders) {
  const std::string page = RenderMemoryMapPage(admin::v1::MemorySnapshot());
  EXPECT_THAT(page, HasSubstr("</html>"));
  EXPECT_EQ(CountOf(page, "<rect class=\"block\""), 0);
}

}  // namespace
}  // namespace ndserve
