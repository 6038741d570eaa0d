// Runs every per-op fixture of tests/fixtures/ops (written by tools/gen_models.py with a
// numpy reference) through the dispatch table on every device present, with the
// tolerance the fixture states. The ONNX attributes and shape inputs go through
// BuildOpAttrs exactly as the engine's would.
#include <set>
#include <tuple>
#include <variant>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/fixture_case.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

namespace fs = std::filesystem;

struct FixtureTensor {
  std::string kind;  // input | const | output
  std::string name;
  HostTensor tensor;
};

struct Fixture {
  std::string op_type;
  int opset = 0;
  AttrMap attrs;
  std::vector<FixtureTensor> inputs;  // node input order
  std::vector<FixtureTensor> outputs;
  double atol = 0, rtol = 0;
  std::string model;  // absolute: the case directory joined with the manifest's path
};

// The shared case.txt reader's result in this test's terms: tensors as HostTensors,
// attributes as the AttrMap that BuildOpAttrs takes.
absl::StatusOr<Fixture> LoadFixture(const fs::path& dir) {
  NDS_ASSIGN_OR_RETURN(fixtures::FixtureCase c, fixtures::ReadFixtureCase(dir));
  Fixture fx;
  fx.op_type = c.op;
  fx.opset = c.opset;
  fx.atol = c.atol;
  fx.rtol = c.rtol;
  fx.model = c.model.string();
  for (const auto& [name, value] : c.attrs) {
    fx.attrs[name] = std::visit(
        [](const auto& v) -> AttrValue {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, fixtures::FixtureTensorAttr>) {
            HostValue h;
            h.dtype = v.dtype;
            h.shape.assign(v.dims.begin(), v.dims.end());
            h.ints = v.ints;
            h.reals = v.reals;
            return h;
          } else {
            return AttrValue(v);
          }
        },
        value);
  }
  auto to_host = [](const fixtures::FixtureTensor& t) {
    return FixtureTensor{t.kind, t.name,
                         HostTensor{t.dtype, Shape(t.dims.begin(), t.dims.end()), t.bytes}};
  };
  for (const fixtures::FixtureTensor& t : c.inputs) fx.inputs.push_back(to_host(t));
  for (const fixtures::FixtureTensor& t : c.outputs) fx.outputs.push_back(to_host(t));
  return fx;
}

fs::path OpsDir() { return SourceDir() / "tests/fixtures/ops"; }

std::vector<std::string> CaseNames() { return fixtures::FixtureCaseNames(OpsDir()); }

using Param = std::tuple<std::string, Device>;

class OpsFixtureTest : public ::testing::TestWithParam<Param> {};

TEST_P(OpsFixtureTest, MatchesNumpyReference) {
  const auto& [name, device] = GetParam();
  auto fx = LoadFixture(OpsDir() / name);
  ASSERT_TRUE(fx.ok()) << fx.status();
  auto op = OpKindFromOnnx(fx->op_type);
  ASSERT_TRUE(op.ok()) << op.status();

  // Split node inputs into kernel inputs and host inputs (ops.def).
  std::vector<HostTensor> inputs;
  std::vector<std::optional<HostValue>> host(fx->inputs.size());
  for (std::size_t i = 0; i < fx->inputs.size(); ++i) {
    const HostTensor& t = fx->inputs[i].tensor;
    if (GetOpInfo(*op).IsHostInput(static_cast<int>(i))) {
      ASSERT_EQ(fx->inputs[i].kind, "const") << "host inputs must be initializers";
      auto value = HostValue::FromBytes(t.dtype, t.shape, t.bytes);
      ASSERT_TRUE(value.ok()) << value.status();
      host[i] = *std::move(value);
    } else {
      inputs.push_back(t);
    }
  }
  // What the engine's graph builder adds to every node (node_attrs.h).
  fx->attrs[kNodeOutputCountAttr] = static_cast<int64_t>(fx->outputs.size());
  auto attrs = BuildOpAttrs(*op, fx->opset, fx->attrs, HostInputs(std::move(host)));
  ASSERT_TRUE(attrs.ok()) << attrs.status();

  DeviceRunner runner(device);
  auto got = runner.Run(*op, inputs, *attrs, static_cast<int>(fx->outputs.size()));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), fx->outputs.size());
  for (std::size_t i = 0; i < got->size(); ++i) {
    EXPECT_TRUE(AllClose((*got)[i], fx->outputs[i].tensor, fx->atol, fx->rtol))
        << "output " << fx->outputs[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, OpsFixtureTest,
                         ::testing::Combine(::testing::ValuesIn(CaseNames()),
                                            ::testing::ValuesIn(TestDevices())),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           const Device& d = std::get<1>(info.param);
                           return absl::StrCat(
                               std::get<0>(info.param), "_",
                               d.is_cuda() ? absl::StrCat("cuda", d.ordinal) : "cpu");
                         });

TEST(OpsFixtureCoverage, EveryOpHasAFixture) {
  const std::vector<std::string> names = CaseNames();
  ASSERT_FALSE(names.empty()) << "no fixtures under " << OpsDir()
                              << "; run /usr/bin/python3 tools/gen_models.py";
  std::set<std::string> ops;
  for (const std::string& name : names) {
    auto fx = LoadFixture(OpsDir() / name);
    ASSERT_TRUE(fx.ok()) << name << ": " << fx.status();
    EXPECT_TRUE(fs::exists(OpsDir() / name / fx->model)) << name;
    ops.insert(fx->op_type);
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    // If needs subgraphs, which a one-node case cannot hold: tests/fixtures/graphs/
    // if_branches covers it (tests/unit/engine/control_flow_test.cc).
    if (GetOpInfo(static_cast<OpKind>(i)).control) continue;
    EXPECT_TRUE(ops.count(std::string(OpKindName(static_cast<OpKind>(i)))))
        << "no fixture for " << OpKindName(static_cast<OpKind>(i));
  }
}

TEST(ModelFixtures, ReferenceManifestsAreConsistent) {
  for (const char* model : {"mlp", "recsys", "transformer"}) {
    const fs::path dir = SourceDir() / "tests/fixtures/models" / model / "reference";
    auto fx = LoadFixture(dir);
    ASSERT_TRUE(fx.ok()) << model << ": " << fx.status();
    // recsys's 51 MB model is not committed; tools/gen_models.py writes it.
    if (std::string(model) != "recsys") {
      EXPECT_TRUE(fs::exists(dir / fx->model)) << model << ": " << fx->model;
    }
    EXPECT_FALSE(fx->inputs.empty());
    EXPECT_EQ(fx->outputs.size(), 1u);
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
