// Einsum beyond the numpy fixtures: what the equation parser accepts and refuses, and
// the shape checks against the operands.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<OpAttrs> Build(const std::string& equation) {
  return BuildOpAttrs(OpKind::kEinsum, 13, {{"equation", equation}});
}

absl::Status Infer(const std::string& equation, std::vector<TensorDesc> in) {
  absl::StatusOr<OpAttrs> attrs = Build(equation);
  if (!attrs.ok()) return attrs.status();
  return InferOutputs(OpKind::kEinsum, in, *attrs).status();
}

TEST(EinsumRules, RefusedEquationsNameTheEquation) {
  struct Bad {
    std::string equation;
    absl::StatusCode code;
    const char* text;
  };
  for (const Bad& c : std::vector<Bad>{
           {"...ij,...jk->...ik", absl::StatusCode::kUnimplemented, "ellipses"},
           {"ij,jk,kl->il", absl::StatusCode::kUnimplemented, "3 operands"},
           {"ii->i", absl::StatusCode::kUnimplemented, "diagonal"},
           {"ij->k", absl::StatusCode::kInvalidArgument, "'k' is in no operand"},
           {"ij->ii", absl::StatusCode::kInvalidArgument, "repeats"},
           {"i1,jk->ik", absl::StatusCode::kInvalidArgument, "not a letter term"},
       }) {
    const absl::Status s = Build(c.equation).status();
    EXPECT_EQ(s.code(), c.code) << c.equation << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.equation)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.text)) << s;
  }
  EXPECT_EQ(BuildOpAttrs(OpKind::kEinsum, 13, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EinsumRules, OperandsMustMatchTheEquation) {
  const TensorDesc m34{DType::kFp32, {3, 4}}, m45{DType::kFp32, {4, 5}}, m55{DType::kFp32, {5, 5}};
  EXPECT_TRUE(Infer("ij,jk->ik", {m34, m45}).ok());
  const absl::Status rank = Infer("bij,bjk->bik", {m34, m45});
  EXPECT_EQ(rank.code(), absl::StatusCode::kInvalidArgument) << rank;
  EXPECT_THAT(std::string(rank.message()),
              HasSubstr("Einsum 'bij,bjk->bik': operand 0 has shape [3,4]"));
  const absl::Status size = Infer("ij,jk->ik", {m34, m55});
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument) << size;
  EXPECT_THAT(std::string(size.message()), HasSubstr("letter 'j' has size 4 and 5"));
  EXPECT_EQ(Infer("ij,jk->ik", {m34}).code(), absl::StatusCode::kInvalidArgument);
  // Forms without a lowering.
  EXPECT_EQ(Infer("ij->i", {m34}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Infer("ij,jk->i", {m34, m45}).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(Infer("ij,jk->ik", {{DType::kInt32, {3, 4}}, m45}).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(EinsumKernel, SpacesAreIgnoredAndTheProductIsRight) {
  DeviceRunner runner(Device::Cpu());
  absl::StatusOr<OpAttrs> attrs = Build(" ij , jk -> ki ");
  ASSERT_TRUE(attrs.ok()) << attrs.status();
  const HostTensor a = HostTensor::Of<float>({2, 2}, {1, 2, 3, 4});
  const HostTensor b = HostTensor::Of<float>({2, 3}, {1, 0, 2, 0, 1, 3});
  auto got = runner.Run(OpKind::kEinsum, {a, b}, *attrs);
  ASSERT_TRUE(got.ok()) << got.status();
  // (a b)^T: a b = [[1, 2, 8], [3, 4, 18]].
  EXPECT_TRUE(AllClose((*got)[0], HostTensor::Of<float>({3, 2}, {1, 3, 2, 4, 8, 18}), 0, 0));
}

}  // namespace
}  // namespace ndserve::kernels::testing
