#ifndef NDSERVE_TESTS_UNIT_TRAIN_TRAIN_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_TRAIN_TRAIN_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/host_tensor.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train::testing_util {

template <typename T>
T Must(absl::StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status();
  if (!value.ok()) return T();
  return *std::move(value);
}

// A client's tensor (what a Train stream's Batch carries) from typed values.
template <typename T>
engine::HostTensor Tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape,
                          const std::vector<T>& values) {
  engine::HostTensor t{name, dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

inline std::vector<float> Floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// A memory system of the test's own with a trainer manager and a batch manager under it.
class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trainer_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kTrainer, "trainer"));
    batch_ = Must(trainer_->NewSubManager(ManagerLevel::kBatch, "batch"));
  }

  std::uint64_t AllocatedBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  std::vector<float> Random(std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(rng_);
    return v;
  }
  NDArray Array(NDManager& scope, const std::vector<std::int64_t>& shape,
                const std::vector<float>& values) {
    return Must(scope.FromHostValues<float>(shape, values));
  }
  Variable Param(const std::vector<std::int64_t>& shape, std::vector<float> values) {
    return Must(Variable::Parameter(Array(*trainer_, shape, values), *trainer_));
  }
  Variable RandomParam(const std::vector<std::int64_t>& shape, float lo = -1.0f, float hi = 1.0f) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return Param(shape, Random(n, lo, hi));
  }
  Variable Ids(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& ids) {
    return Variable::Constant(Must(trainer_->FromHostValues<std::int64_t>(shape, ids)));
  }

  using Fn = std::function<absl::StatusOr<Variable>(NDManager&, absl::Span<const Variable>)>;

  // Compares the gradients Backward gives every parameter of `params` with central finite
  // differences of sum(f(params) * R) for a fixed random R.
  void GradCheck(const Fn& f, std::vector<Variable> params, float eps = 1e-2f, float tol = 1e-2f) {
    Variable out = Must(f(*batch_, params));
    ASSERT_FALSE(out.is_null());
    const std::vector<std::int64_t> out_shape(out.shape().begin(), out.shape().end());
    const std::vector<float> r = Random(out.value().num_elements());
    ASSERT_TRUE(ClearGrad(params).ok());
    NDArray root_grad = Array(*batch_, out_shape, r);
    ASSERT_TRUE(Backward(out, *batch_, root_grad).ok());
    auto objective = [&]() {
      auto scratch = Must(trainer_->NewSubManager(ManagerLevel::kBatch, "fd"));
      Variable y = Must(f(*scratch, params));
      std::vector<float> v = Must(y.value().ToVector<float>());
      double s = 0;
      for (std::size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * r[i];
      EXPECT_TRUE(scratch->Close().ok());
      return s;
    };
    for (std::size_t p = 0; p < params.size(); ++p) {
      std::vector<float> grad = Must(params[p].grad().ToVector<float>());
      float* w = Must(params[p].value().DataAs<float>());
      for (std::size_t j = 0; j < grad.size(); ++j) {
        const float saved = w[j];
        w[j] = saved + eps;
        const double up = objective();
        w[j] = saved - eps;
        const double down = objective();
        w[j] = saved;
        const double numeric = (up - down) / (2.0 * eps);
        EXPECT_NEAR(grad[j], numeric, tol * (1.0 + std::fabs(numeric)))
            << "parameter " << p << " element " << j;
      }
    }
  }

  MemorySystem memory_;
  std::shared_ptr<NDManager> trainer_;
  std::shared_ptr<NDManager> batch_;
  std::mt19937 rng_{1234};
};

}  // namespace ndserve::train::testing_util

#endif  // NDSERVE_TESTS_UNIT_TRAIN_TRAIN_TEST_UTIL_H_
