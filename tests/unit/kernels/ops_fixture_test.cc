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
using fixtures::FixtureCase;

// The fixture with its attributes as the engine's loader would pass them to BuildOpAttrs.
struct Fixture {
  FixtureCase c;
  AttrMap attrs;
};

absl::StatusOr<Fixture> LoadFixture(const fs::path& dir) {
  NDS_ASSIGN_OR_RETURN(FixtureCase c, fixtures::ReadFixtureCase(dir));
  Fixture fx{std::move(c), {}};
  for (const auto& [name, value] : fx.c.attrs) {
    fx.attrs[name] = std::visit([](const auto& v) { return AttrValue(v); }, value);
  }
  return fx;
}

HostTensor ToHost(const fixtures::FixtureTensor& t) {
  return HostTensor{t.dtype, Shape(t.dims.begin(), t.dims.end()), t.bytes};
}

fs::path OpsDir() { return SourceDir() / "tests/fixtures/ops"; }

std::vector<std::string> CaseNames() { return fixtures::FixtureCaseNames(OpsDir()); }

using Param = std::tuple<std::string, Device>;

class OpsFixtureTest : public ::testing::TestWithParam<Param> {};

TEST_P(OpsFixtureTest, MatchesNumpyReference) {
  const auto& [name, device] = GetParam();
  auto fx = LoadFixture(OpsDir() / name);
  ASSERT_TRUE(fx.ok()) << fx.status();
  auto op = OpKindFromOnnx(fx->c.op);
  ASSERT_TRUE(op.ok()) << op.status();

  // Split node inputs into kernel inputs and the shape-deciding one.
  std::vector<HostTensor> inputs;
  std::optional<std::vector<int64_t>> shape_input;
  for (std::size_t i = 0; i < fx->c.inputs.size(); ++i) {
    if (static_cast<int>(i) == ShapeInputIndex(*op)) {
      ASSERT_EQ(fx->c.inputs[i].kind, "const") << "shape inputs must be initializers";
      shape_input = ToHost(fx->c.inputs[i]).Values<int64_t>();
    } else {
      inputs.push_back(ToHost(fx->c.inputs[i]));
    }
  }
  auto attrs = BuildOpAttrs(*op, fx->c.opset, fx->attrs, shape_input);
  ASSERT_TRUE(attrs.ok()) << attrs.status();

  DeviceRunner runner(device);
  auto got = runner.Run(*op, inputs, *attrs, static_cast<int>(fx->c.outputs.size()));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), fx->c.outputs.size());
  for (std::size_t i = 0; i < got->size(); ++i) {
    EXPECT_TRUE(AllClose((*got)[i], ToHost(fx->c.outputs[i]), fx->c.atol, fx->c.rtol))
        << "output " << fx->c.outputs[i].name;
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
    EXPECT_TRUE(fs::exists(fx->c.model)) << name;
    ops.insert(fx->c.op);
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    EXPECT_TRUE(ops.count(std::string(OpKindName(static_cast<OpKind>(i)))))
        << "no fixture for " << OpKindName(static_cast<OpKind>(i));
  }
}

TEST(ModelFixtures, ReferenceManifestsAreConsistent) {
  for (const char* model : {"mlp", "recsys", "transformer"}) {
    const fs::path dir = SourceDir() / "tests/fixtures/models" / model / "reference";
    auto fx = fixtures::ReadFixtureCase(dir);
    ASSERT_TRUE(fx.ok()) << model << ": " << fx.status();
    // recsys's 51 MB model is not committed; tools/gen_models.py writes it.
    if (std::string(model) != "recsys") {
      EXPECT_TRUE(fs::exists(fx->model)) << model << ": " << fx->model;
    }
    EXPECT_FALSE(fx->inputs.empty());
    EXPECT_EQ(fx->outputs.size(), 1u);
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
