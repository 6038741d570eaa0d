// Where train/'s ops run (train/compute.h): the thread's current kernel context, the
// CPU's unless a step made another current. An op handed arrays of another device than
// the context's fails with a status naming both and touches nothing: a GPU step can
// never read host memory as device memory, nor the reverse.
#include "train/compute.h"

#include "gtest/gtest.h"
#include "tests/unit/train/train_test_util.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/reduce_ops.h"

namespace ndserve::train {
namespace {

using testing_util::Must;
using testing_util::TrainTest;

class ComputeTest : public TrainTest {};

TEST_F(ComputeTest, ScopesNestAndRestoreTheCpuContext) {
  EXPECT_EQ(CurrentContext().device, Device::Cpu());
  kernels::KernelContext gpu = kernels::KernelContext::Cpu();
  gpu.device = Device::Cuda(0);
  {
    const ComputeScope outer(gpu);
    EXPECT_EQ(CurrentContext().device, Device::Cuda(0));
    const kernels::KernelContext cpu = kernels::KernelContext::Cpu();
    {
      const ComputeScope inner(cpu);
      EXPECT_EQ(CurrentContext().device, Device::Cpu());
    }
    EXPECT_EQ(CurrentContext().device, Device::Cuda(0));
  }
  EXPECT_EQ(CurrentContext().device, Device::Cpu());
}

// Host arrays under a CUDA context: every path of an op (forward kernel, training table,
// fill and axpy) refuses them before any kernel runs.
TEST_F(ComputeTest, ArraysOfAnotherDeviceAreRefusedNamingBoth) {
  Variable w = Param({2, 3}, {1, 2, 3, 4, 5, 6});
  Variable x = Variable::Constant(Array(*batch_, {4, 2}, {1, 0, 0, 1, 1, 1, 2, 0}));
  kernels::KernelContext gpu = kernels::KernelContext::Cpu();
  gpu.device = Device::Cuda(0);
  const ComputeScope scope(gpu);
  // A build without CUDA kernels answers the same.
  const absl::Status forward = MatMul(*batch_, x, w).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(forward)) << forward;
  EXPECT_NE(forward.message().find("cpu:0"), absl::string_view::npos) << forward;
  EXPECT_NE(forward.message().find("cuda:0"), absl::string_view::npos) << forward;
  const absl::Status fill = Fill(w.grad(), 1.0f);
  EXPECT_TRUE(absl::IsFailedPrecondition(fill)) << fill;
  EXPECT_NE(fill.message().find("cpu:0"), absl::string_view::npos) << fill;
  EXPECT_NE(fill.message().find("cuda:0"), absl::string_view::npos) << fill;
  EXPECT_TRUE(absl::IsFailedPrecondition(Axpy(1.0f, w.value(), w.grad(), true)));
  EXPECT_EQ(Must(w.grad().ToVector<float>()), std::vector<float>(6, 0.0f));
}

// AddReduced sums a broadcast operand's gradient back to its shape on the step's
// device, through the row-sum entry for a trailing block and ReduceSum otherwise.
TEST_F(ComputeTest, AddReducedSumsOverTheBroadcastAxes) {
  const NDArray full = Array(*batch_, {2, 3}, {1, 2, 3, 4, 5, 6});
  const NDArray row = Array(*batch_, {3}, {10, 10, 10});
  ASSERT_TRUE(AddReduced(*batch_, 1.0f, full, {3}, row, true).ok());
  EXPECT_EQ(Must(row.ToVector<float>()), (std::vector<float>{15, 17, 19}));
  const NDArray column = Array(*batch_, {2, 1}, {0, 0});
  ASSERT_TRUE(AddReduced(*batch_, -2.0f, full, {2, 1}, column, false).ok());
  EXPECT_EQ(Must(column.ToVector<float>()), (std::vector<float>{-12, -30}));
  const NDArray all = Array(*batch_, {}, {1});
  ASSERT_TRUE(AddReduced(*batch_, 0.5f, full, {}, all, true).ok());
  EXPECT_EQ(Must(all.ToVector<float>()), (std::vector<float>{11.5f}));
}

}  // namespace
}  // namespace ndserve::train
