// Updated weights after 1 and 5 steps equal PyTorch's (tools/gen_train_fixtures.py) within
// 1e-5, for an MLP, an embedding-bag model and an LSTM cell with truncated BPTT, under
// plain SGD, Nesterov momentum with weight decay, and Adam.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/train/train_fixture.h"
#include "tests/unit/train/train_test_util.h"
#include "train/carried_state.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/losses.h"
#include "train/lstm_cell.h"
#include "train/optimizer.h"
#include "train/reduce_ops.h"
#include "train/shape_ops.h"

namespace ndserve::train {
namespace {

using testing_util::Must;
using testing_util::TrainTest;

using testing_util::FixtureTensor;
using testing_util::ReadTrainFixture;

class TorchParityTest : public TrainTest,
                        public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
 protected:
  NDArray Upload(NDManager& scope, const FixtureTensor& t) {
    return Must(scope.FromHost(t.dims, t.is_int ? DType::kInt64 : DType::kFp32,
                               absl::Span<const std::uint8_t>(t.bytes)));
  }
  Variable Input(const std::string& name, int step) {
    return Variable::Constant(Upload(*batch_, data_.at(absl::StrCat("batch", step, ".", name))));
  }
  Variable P(const std::string& name) { return params_.at(name); }

  std::map<std::string, FixtureTensor> data_;
  std::map<std::string, Variable> params_;
};

TEST_P(TorchParityTest, WeightsAfterOneAndFiveSteps) {
  const auto& [model, opt] = GetParam();
  data_ = ReadTrainFixture(absl::StrCat(NDSERVE_TRAIN_FIXTURES, "/", model, "_", opt));
  std::vector<Variable> all;
  std::vector<std::string> names;
  for (const auto& [name, t] : data_) {
    if (name.rfind("init.", 0) != 0) continue;
    Variable p = Must(Variable::Parameter(Upload(*trainer_, t), *trainer_));
    params_[name.substr(5)] = p;
    all.push_back(p);
    names.push_back(name.substr(5));
  }
  ASSERT_FALSE(all.empty());
  std::unique_ptr<Optimizer> optimizer;
  if (opt == "sgd") {
    optimizer = Must(Sgd::Create(all, SgdOptions{0.1f}, *trainer_));
  } else if (opt == "momentum") {
    optimizer = Must(Sgd::Create(all, SgdOptions{0.05f, 0.9f, 0.01f, true}, *trainer_));
  } else {
    optimizer = Must(Adam::Create(all, AdamOptions{0.01f, 0.9f, 0.999f, 1e-8f, 0.001f}, *trainer_));
  }
  CarriedState state = Must(CarriedState::Create(*trainer_, {{4, 5}, {4, 5}}));
  GemmOptions linear;
  linear.trans_b = true;
  const std::vector<float> torch_losses = [&] {
    const FixtureTensor& t = data_.at("losses");
    std::vector<float> v(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    return v;
  }();
  for (int step = 0; step < 5; ++step) {
    batch_ = Must(trainer_->NewSubManager(ManagerLevel::kBatch));
    NDManager& s = *batch_;
    Variable loss;
    if (model == "mlp") {
      Variable h = Must(Relu(s, Must(Gemm(s, Input("x", step), P("fc0.weight"), P("fc0.bias"), linear))));
      Variable logits = Must(Gemm(s, h, P("fc1.weight"), P("fc1.bias"), linear));
      loss = Must(CrossEntropyLoss(s, logits, Input("labels", step)));
    } else if (model == "embedding") {
      Variable rows = Must(Gather(s, P("emb.table"), Input("ids", step), 0));
      Variable bag = Must(ReduceMean(s, rows, std::vector<std::int64_t>{1}, false));
      Variable features = Must(Concat(s, std::vector<Variable>{bag, Input("dense", step)}, 1));
      Variable h = Must(Tanh(s, Must(Gemm(s, features, P("fc0.weight"), P("fc0.bias"), linear))));
      Variable logits = Must(Gemm(s, h, P("fc1.weight"), P("fc1.bias"), linear));
      loss = Must(BceWithLogitsLoss(s, logits, Input("targets", step)));
    } else {
      std::vector<Variable> hc = state.Load();
      LstmState st{hc[0], hc[1]};
      LstmWeights w{P("w_ih"), P("w_hh"), P("b_ih"), P("b_hh")};
      Variable x = Input("x", step);
      std::vector<Variable> preds;
      for (int t = 0; t < 2; ++t) {
        Variable xt = Must(Reshape(s, Must(Narrow(s, x, 0, t, 1)), std::vector<std::int64_t>{4, 3}));
        st = Must(LstmCell(s, xt, st, w));
        preds.push_back(Must(Gemm(s, st.h, P("head.weight"), P("head.bias"), linear)));
      }
      Variable y = Must(Reshape(s, Input("y", step), std::vector<std::int64_t>{-1, 1}));
      loss = Must(MseLoss(s, Must(Concat(s, preds, 0)), y));
      ASSERT_TRUE(Backward(loss, s).ok());
      ASSERT_TRUE(state.Carry({st.h, st.c}).ok());
      EXPECT_EQ(GraphNodeCount(st.h), 0);
    }
    if (model != "recurrent") ASSERT_TRUE(Backward(loss, s).ok());
    EXPECT_NEAR(Must(loss.value().ToVector<float>())[0], torch_losses[step], 1e-5) << "step " << step;
    ASSERT_TRUE(optimizer->Step().ok());
    ASSERT_TRUE(ClearGrad(all).ok());
    ASSERT_TRUE(batch_->Close().ok());
    if (step == 0 || step == 4) {
      for (const std::string& name : names) {
        const FixtureTensor& want = data_.at(absl::StrCat("step", step + 1, ".", name));
        std::vector<float> expected(want.bytes.size() / 4);
        std::memcpy(expected.data(), want.bytes.data(), want.bytes.size());
        std::vector<float> got = Must(P(name).value().ToVector<float>());
        ASSERT_EQ(got.size(), expected.size());
        float worst = 0;
        for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - expected[i]));
        EXPECT_LE(worst, 1e-5f) << name << " after step " << step + 1;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, TorchParityTest,
    ::testing::Combine(::testing::Values("mlp", "embedding", "recurrent"),
                       ::testing::Values("sgd", "momentum", "adam")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace ndserve::train
