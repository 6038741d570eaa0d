// PlaceInstances: every rule of docs/design.md §4 "Instance placement", without a GPU.
#include "engine/instance_placement.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = InstanceGroupConfig::Kind;

InstanceGroupConfig Group(Kind kind, int count, std::vector<int> gpus = {},
                          std::string name = "") {
  InstanceGroupConfig g;
  g.kind = kind;
  g.count = count;
  g.gpus = std::move(gpus);
  g.name = std::move(name);
  return g;
}

std::vector<InstancePlacement> Place(const std::vector<InstanceGroupConfig>& groups,
                                     int visible_gpus, Device daemon) {
  absl::StatusOr<std::vector<InstancePlacement>> p = PlaceInstances(groups, visible_gpus, daemon);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : std::vector<InstancePlacement>{};
}

TEST(InstancePlacementTest, NoGroupsIsOnePredictorOnTheDaemonDevice) {
  EXPECT_THAT(Place({}, 0, Device::Cpu()), ElementsAre(InstancePlacement{Device::Cpu(), 1}));
  EXPECT_THAT(Place({}, 4, Device::Cuda(2)), ElementsAre(InstancePlacement{Device::Cuda(2), 1}));
}

TEST(InstancePlacementTest, CpuGroupsStayOnTheCpuWhateverTheDaemonDevice) {
  EXPECT_THAT(Place({Group(Kind::kCpu, 3)}, 0, Device::Cpu()),
              ElementsAre(InstancePlacement{Device::Cpu(), 3}));
  EXPECT_THAT(Place({Group(Kind::kCpu, 2)}, 2, Device::Cuda(1)),
              ElementsAre(InstancePlacement{Device::Cpu(), 2}));
}

TEST(InstancePlacementTest, AutoAndModelGroupsTakeTheDaemonDevice) {
  EXPECT_THAT(Place({Group(Kind::kAuto, 2)}, 0, Device::Cpu()),
              ElementsAre(InstancePlacement{Device::Cpu(), 2}));
  EXPECT_THAT(Place({Group(Kind::kModel, 1), Group(Kind::kAuto, 2)}, 1, Device::Cuda(0)),
              ElementsAre(InstancePlacement{Device::Cuda(0), 3}));
}

TEST(InstancePlacementTest, GpuGroupPlacesCountOnEveryListedGpu) {
  EXPECT_THAT(Place({Group(Kind::kGpu, 2, {0, 1})}, 2, Device::Cuda(0)),
              ElementsAre(InstancePlacement{Device::Cuda(0), 2},
                          InstancePlacement{Device::Cuda(1), 2}));
  // The config's order, not the ordinals', decides which device comes first.
  EXPECT_THAT(Place({Group(Kind::kGpu, 1, {3, 1})}, 4, Device::Cuda(0)),
              ElementsAre(InstancePlacement{Device::Cuda(3), 1},
                          InstancePlacement{Device::Cuda(1), 1}));
}

TEST(InstancePlacementTest, GpuGroupWithoutGpusUsesTheDaemonGpu) {
  EXPECT_THAT(Place({Group(Kind::kGpu, 2)}, 4, Device::Cuda(3)),
              ElementsAre(InstancePlacement{Device::Cuda(3), 2}));
}

TEST(InstancePlacementTest, SeveralGroupsAndDuplicatesAddUpPerDevice) {
  EXPECT_THAT(Place({Group(Kind::kGpu, 1, {0, 1}), Group(Kind::kCpu, 2),
                     Group(Kind::kGpu, 3, {1}), Group(Kind::kGpu, 1, {0, 0})},
                    2, Device::Cuda(0)),
              ElementsAre(InstancePlacement{Device::Cuda(0), 3},
                          InstancePlacement{Device::Cuda(1), 4},
                          InstancePlacement{Device::Cpu(), 2}));
}

TEST(InstancePlacementTest, GpuKindNeedsTheDaemonOnAGpu) {
  absl::StatusOr<std::vector<InstancePlacement>> p =
      PlaceInstances({Group(Kind::kGpu, 1, {0}, "gpus")}, 1, Device::Cpu());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("instance_group 'gpus' is KIND_GPU, but the engine runs on cpu:0"));
}

TEST(InstancePlacementTest, MissingGpuIsALoadErrorNamingIt) {
  absl::StatusOr<std::vector<InstancePlacement>> p =
      PlaceInstances({Group(Kind::kCpu, 1), Group(Kind::kGpu, 1, {0, 2})}, 2, Device::Cuda(0));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("instance_group 1 lists gpu 2, but 2 GPUs are visible (cuda:0 to cuda:1)"));
  p = PlaceInstances({Group(Kind::kGpu, 1, {1})}, 1, Device::Cuda(0));
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("but 1 GPU is visible (cuda:0)"));
}

TEST(InstancePlacementTest, TotalOverTheInstanceLimitIsRefused) {
  // Each group is within the config's per-group limit, but listing GPUs multiplies it.
  EXPECT_EQ(TotalInstances(
                Place({Group(Kind::kGpu, kMaxInstanceCount / 2, {0, 1})}, 2, Device::Cuda(0))),
            kMaxInstanceCount);
  absl::StatusOr<std::vector<InstancePlacement>> p =
      PlaceInstances({Group(Kind::kGpu, kMaxInstanceCount, {0, 1})}, 2, Device::Cuda(0));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("place 2048 predictors over 2 device(s); at most 1024"));
  // A long duplicate list cannot overflow the count.
  std::vector<int> many(5000, 0);
  p = PlaceInstances({Group(Kind::kGpu, kMaxInstanceCount, many)}, 1, Device::Cuda(0));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InstancePlacementTest, GroupsThatPlaceNothingLeaveOnePredictor) {
  EXPECT_THAT(Place({Group(Kind::kCpu, 0)}, 0, Device::Cuda(0)),
              ElementsAre(InstancePlacement{Device::Cuda(0), 1}));
}

}  // namespace
}  // namespace ndserve::engine
