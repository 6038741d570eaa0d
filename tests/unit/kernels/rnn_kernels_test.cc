// LSTM, GRU and RNN beyond the numpy fixtures: attribute and shape errors, inputs left
// out before present ones (kPresentInputsAttr), data-dependent errors and working space.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "kernels/optional_inputs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSeq = 3, kBatch = 2, kInput = 3, kHidden = 4;

AttrMap LstmAttrs(int64_t hidden = kHidden) { return {{"hidden_size", hidden}}; }

OpAttrs MustBuild(OpKind op, const AttrMap& attrs, int opset = 14) {
  absl::StatusOr<OpAttrs> a = BuildOpAttrs(op, opset, attrs);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.value_or(OpAttrs{});
}

// X, W, R, B, sequence_lens, initial_h, initial_c of a small forward LSTM.
std::vector<HostTensor> LstmInputs(int64_t gates = 4) {
  return {RandomTensor({kSeq, kBatch, kInput}, 1, -1, 1),
          RandomTensor({1, gates * kHidden, kInput}, 2, -0.5, 0.5),
          RandomTensor({1, gates * kHidden, kHidden}, 3, -0.5, 0.5),
          RandomTensor({1, 2 * gates * kHidden}, 4, -0.5, 0.5),
          HostTensor::Of<int32_t>({kBatch}, {kSeq, kSeq}),
          RandomTensor({1, kBatch, kHidden}, 5, -1, 1),
          RandomTensor({1, kBatch, kHidden}, 6, -1, 1)};
}

TEST(RecurrentRules, AttributeErrorsNameTheOp) {
  struct BadAttrs {
    AttrMap attrs;
    absl::StatusCode code;
    const char* text;
  };
  const std::vector<BadAttrs> cases = {
      {{}, absl::StatusCode::kInvalidArgument, "hidden_size"},
      {{{"hidden_size", int64_t{0}}}, absl::StatusCode::kInvalidArgument, "hidden_size"},
      {{{"hidden_size", int64_t{4}}, {"direction", std::string("sideways")}},
       absl::StatusCode::kInvalidArgument,
       "sideways"},
      {{{"hidden_size", int64_t{4}}, {"layout", int64_t{2}}},
       absl::StatusCode::kInvalidArgument,
       "layout"},
      {{{"hidden_size", int64_t{4}}, {"clip", -1.0f}}, absl::StatusCode::kInvalidArgument, "clip"},
      {{{"hidden_size", int64_t{4}}, {"activations", std::string("Relu,Tanh,Tanh")}},
       absl::StatusCode::kUnimplemented,
       "activations Relu,Tanh,Tanh"},
      {{{"hidden_size", int64_t{4}}, {"activation_alpha", std::vector<float>{1.0f}}},
       absl::StatusCode::kUnimplemented,
       "activations"},
      {{{"hidden_size", int64_t{4}}, {"input_forget", int64_t{1}}},
       absl::StatusCode::kUnimplemented,
       "input_forget"},
      {{{"hidden_size", int64_t{4}}, {kPresentInputsAttr, int64_t{0b101}}},
       absl::StatusCode::kInvalidArgument,
       "X, W and R"},
      {{{"hidden_size", int64_t{4}}, {kPresentInputsAttr, int64_t{0x1ff}}},
       absl::StatusCode::kInvalidArgument,
       "more than 8"},
  };
  for (const BadAttrs& c : cases) {
    absl::StatusOr<OpAttrs> a = BuildOpAttrs(OpKind::kLSTM, 14, c.attrs);
    ASSERT_FALSE(a.ok()) << c.text;
    EXPECT_EQ(a.status().code(), c.code) << a.status();
    EXPECT_THAT(std::string(a.status().message()), HasSubstr("LSTM")) << a.status();
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.text)) << a.status();
  }
}

TEST(RecurrentRules, DefaultActivationsMayBeNamed) {
  for (const char* names : {"Sigmoid,Tanh,Tanh", "sigmoid,tanh,tanh,Sigmoid,Tanh,Tanh"}) {
    EXPECT_TRUE(BuildOpAttrs(OpKind::kLSTM, 14,
                             {{"hidden_size", int64_t{4}}, {"activations", std::string(names)}})
                    .ok())
        << names;
  }
  EXPECT_TRUE(BuildOpAttrs(OpKind::kRNN, 14,
                           {{"hidden_size", int64_t{4}}, {"activations", std::string("Tanh")}})
                  .ok());
  const absl::Status relu =
      BuildOpAttrs(OpKind::kRNN, 14,
                   {{"hidden_size", int64_t{4}}, {"activations", std::string("Relu")}})
          .status();
  EXPECT_EQ(relu.code(), absl::StatusCode::kUnimplemented) << relu;
  EXPECT_THAT(std::string(relu.message()), HasSubstr("RNN: activations Relu"));
}

TEST(RecurrentRules, ShapeAndTypeErrors) {
  const OpAttrs attrs = MustBuild(OpKind::kLSTM, LstmAttrs());
  const std::vector<HostTensor> good = LstmInputs();
  auto infer = [&](std::vector<HostTensor> in) {
    std::vector<TensorDesc> d;
    for (const HostTensor& t : in) d.push_back(t.desc());
    return InferOutputs(OpKind::kLSTM, d, attrs).status();
  };
  EXPECT_TRUE(infer(good).ok());
  {
    std::vector<HostTensor> in = good;
    in[1] = RandomTensor({1, 3 * kHidden, kInput}, 7);  // a GRU's W
    const absl::Status s = infer(in);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("LSTM: W has shape [1,12,3], expected [1,16,3]"));
  }
  {
    std::vector<HostTensor> in = good;
    in[0] = RandomTensor({kSeq, kInput}, 7);
    EXPECT_EQ(infer(in).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    std::vector<HostTensor> in = good;
    in[4] = HostTensor::Of<int64_t>({kBatch}, {kSeq, kSeq});
    const absl::Status s = infer(in);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("sequence_lens"));
  }
  {
    std::vector<HostTensor> in = good;
    in[5] = RandomTensor({1, kBatch + 1, kHidden}, 7);
    EXPECT_THAT(std::string(infer(in).message()), HasSubstr("initial_h"));
  }
  std::vector<HostTensor> too_few(good.begin(), good.begin() + 2);
  EXPECT_EQ(infer(too_few).code(), absl::StatusCode::kInvalidArgument);
}

// What the engine does for LSTM(X, W, R, B, "", initial_h, initial_c): the kernel gets six
// inputs and the mask says which. Same result as a full-length sequence_lens.
TEST(RecurrentKernels, AbsentSequenceLensBeforePresentStates) {
  DeviceRunner runner(Device::Cpu());
  const std::vector<HostTensor> all = LstmInputs();
  auto want = runner.Run(OpKind::kLSTM, all, MustBuild(OpKind::kLSTM, LstmAttrs()), 3);
  ASSERT_TRUE(want.ok()) << want.status();

  AttrMap attrs = LstmAttrs();
  attrs[kPresentInputsAttr] =
      PresentInputsMask(std::vector<std::string>{"X", "W", "R", "B", "", "h0", "c0"});
  const std::vector<HostTensor> present = {all[0], all[1], all[2], all[3], all[5], all[6]};
  auto got = runner.Run(OpKind::kLSTM, present, MustBuild(OpKind::kLSTM, attrs), 3);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 0, 0)) << i;
}

// initial_h absent, initial_c present: only the mask tells the two state inputs apart.
TEST(RecurrentKernels, AbsentInitialHBeforeInitialC) {
  DeviceRunner runner(Device::Cpu());
  std::vector<HostTensor> all = LstmInputs();
  all[5] = HostTensor::Of<float>({1, kBatch, kHidden}, std::vector<float>(kBatch * kHidden, 0));

  AttrMap attrs = LstmAttrs();
  attrs[kPresentInputsAttr] =
      PresentInputsMask(std::vector<std::string>{"X", "W", "R", "", "", "", "c0"});
  const std::vector<HostTensor> no_bias = {all[0], all[1], all[2], all[6]};
  all[3] = HostTensor::Of<float>({1, 8 * kHidden}, std::vector<float>(8 * kHidden, 0));
  auto want = runner.Run(OpKind::kLSTM, all, MustBuild(OpKind::kLSTM, LstmAttrs()), 3);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = runner.Run(OpKind::kLSTM, no_bias, MustBuild(OpKind::kLSTM, attrs), 3);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(AllClose((*got)[i], (*want)[i], 0, 0)) << i;
  // The cell state was read: a different initial_c changes Y_c.
  std::vector<HostTensor> other = no_bias;
  other[3] = RandomTensor({1, kBatch, kHidden}, 99, -1, 1);
  auto changed = runner.Run(OpKind::kLSTM, other, MustBuild(OpKind::kLSTM, attrs), 3);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(AllClose((*changed)[2], (*want)[2], 1e-6, 0));
}

TEST(RecurrentKernels, MaskAndInputCountMustAgree) {
  DeviceRunner runner(Device::Cpu());
  const std::vector<HostTensor> all = LstmInputs();
  AttrMap attrs = LstmAttrs();
  attrs[kPresentInputsAttr] =
      PresentInputsMask(std::vector<std::string>{"X", "W", "R", "B", "", "h0"});
  auto got = runner.Run(OpKind::kLSTM, all, MustBuild(OpKind::kLSTM, attrs), 1);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("LSTM"));
}

TEST(RecurrentKernels, SequenceLengthOutOfRange) {
  DeviceRunner runner(Device::Cpu());
  std::vector<HostTensor> in = LstmInputs(3);
  in.resize(6);
  in[4] = HostTensor::Of<int32_t>({kBatch}, {kSeq + 1, 1});
  auto got = runner.Run(OpKind::kGRU, in, MustBuild(OpKind::kGRU, LstmAttrs()), 2);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("GRU: sequence_lens[0] is 4"));
}

TEST(RecurrentKernels, WorkingSpaceComesFromScratch) {
  DeviceRunner runner(Device::Cpu());
  const std::vector<HostTensor> in = LstmInputs();
  const OpAttrs attrs = MustBuild(OpKind::kLSTM, LstmAttrs());
  runner.scratch().set_limit(64);
  auto got = runner.Run(OpKind::kLSTM, in, attrs, 3);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();

  runner.scratch().set_limit(SIZE_MAX);
  ASSERT_TRUE(runner.Run(OpKind::kLSTM, in, attrs, 3).ok());
  EXPECT_GT(runner.scratch().peak_bytes(), 0u);
  EXPECT_EQ(runner.scratch().held_bytes(), 0u);

  // Without a scratch allocator in the context the kernel says so instead of allocating.
  std::vector<TensorView> views, outs;
  for (const HostTensor& t : in) {
    auto v = runner.Upload(t);
    ASSERT_TRUE(v.ok());
    views.push_back(*v);
  }
  std::vector<TensorDesc> descs;
  for (const HostTensor& t : in) descs.push_back(t.desc());
  auto out_descs = InferOutputs(OpKind::kLSTM, descs, attrs);
  ASSERT_TRUE(out_descs.ok());
  for (const TensorDesc& d : *out_descs) {
    auto v = runner.Allocate(d);
    ASSERT_TRUE(v.ok());
    outs.push_back(*v);
  }
  const absl::Status s = RunKernel(OpKind::kLSTM, KernelContext::Cpu(), views, outs, attrs);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// RNN with a 1-wide hidden state, checked by hand: h1 = tanh(x1 w + b), h2 = tanh(x2 w +
// h1 r + b).
TEST(RecurrentKernels, RnnByHand) {
  DeviceRunner runner(Device::Cpu());
  const std::vector<HostTensor> in = {
      HostTensor::Of<float>({2, 1, 1}, {0.5f, -1.0f}), HostTensor::Of<float>({1, 1, 1}, {2.0f}),
      HostTensor::Of<float>({1, 1, 1}, {0.5f}), HostTensor::Of<float>({1, 2}, {0.25f, -0.5f})};
  auto got = runner.Run(OpKind::kRNN, in, MustBuild(OpKind::kRNN, LstmAttrs(1)), 2);
  ASSERT_TRUE(got.ok()) << got.status();
  const float h1 = std::tanh(0.5f * 2.0f - 0.25f);
  const float h2 = std::tanh(-1.0f * 2.0f + h1 * 0.5f - 0.25f);
  EXPECT_TRUE(AllClose((*got)[0], HostTensor::Of<float>({2, 1, 1, 1}, {h1, h2}), 1e-6, 1e-6));
  EXPECT_TRUE(AllClose((*got)[1], HostTensor::Of<float>({1, 1, 1}, {h2}), 1e-6, 1e-6));
}

}  // namespace
}  // namespace ndserve::kernels::testing
