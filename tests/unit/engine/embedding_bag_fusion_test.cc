// Embedding-bag fusion (engine/fusion.h FuseEmbeddingBags): which bags it folds, that the
// fused graph builds, that the fused Gather computes what Gather + ReduceMean did (on the
// CPU to the bit, on each CUDA device present to rounding), and that a bad id is the same
// INVALID_ARGUMENT either way.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/fusion.h"
#include "engine/graph.h"
#include "gtest/gtest.h"
#include "kernels/op_attrs.h"
#include "kernels/shape_inference.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/engine/run_graph_def.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine {
namespace {

using kernels::testing::AllClose;
using kernels::testing::HostTensor;
using kernels::testing::RandomFloats;

using ::ndserve::engine::testing::Fp32Init;
using ::ndserve::engine::testing::OpTypes;
using ::ndserve::engine::testing::RunDef;

template <typename I>
HostTensor Ids(kernels::Shape shape, const std::vector<I>& v) {
  HostTensor t{sizeof(I) == 8 ? DType::kInt64 : DType::kInt32, std::move(shape),
               std::vector<uint8_t>(v.size() * sizeof(I))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

Initializer IndexInit(const std::string& name, int64_t v) {
  Initializer init{name, DType::kInt64, {}, std::string(sizeof(v), '\0')};
  std::memcpy(init.bytes.data(), &v, sizeof(v));
  return init;
}

// ids INT64 [3, 2, 4] (3 rows, 2 features, bags of 4); feature f picked by
// Gather(ids, f, axis=1) (f = 0, and -1 for the last), its rows of table f [rows_f, 5]
// looked up and averaged by ReduceMean(axes [1], keepdims 0), the two bags concatenated.
GraphDef TwoFeatureBags() {
  GraphDef def;
  def.name = "bags";
  def.opset = 13;
  def.inputs.push_back({"ids", DType::kInt64, {3, 2, 4}});
  def.outputs.push_back({"y", DType::kFp32, {3, 10}});
  const int64_t rows[] = {10, 7};
  const int64_t pick[] = {0, -1};
  std::vector<std::string> bags;
  for (int f = 0; f < 2; ++f) {
    const std::string s = absl::StrCat(f);
    def.initializers.push_back(Fp32Init("table" + s, {rows[f], 5}, RandomFloats(rows[f] * 5, f)));
    def.initializers.push_back(IndexInit("f" + s, pick[f]));
    def.nodes.push_back(
        {"pick" + s, "Gather", "", {"ids", "f" + s}, {"ids" + s}, {{"axis", int64_t{1}}}});
    def.nodes.push_back({"lookup" + s, "Gather", "", {"table" + s, "ids" + s}, {"rows" + s}, {}});
    def.nodes.push_back({"bag" + s,
                         "ReduceMean",
                         "",
                         {"rows" + s},
                         {"bag" + s},
                         {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}});
    bags.push_back("bag" + s);
  }
  def.nodes.push_back({"concat", "Concat", "", bags, {"y"}, {{"axis", int64_t{1}}}});
  return def;
}

// Ids valid for both tables (rows 10 and 7), negative ones among them.
HostTensor GoodIds() {
  return Ids<int64_t>(
      {3, 2, 4}, {0, 9, -1, 3, 6, -7, 2, 2, 4, 4, 4, 1, 0, 5, -3, 6, 8, 7, -10, 2, 1, 1, 3, -2});
}

TEST(FuseEmbeddingBagsTest, FoldsEachBagAndItsFeaturePickIntoOneGather) {
  const GraphDef original = TwoFeatureBags();
  GraphDef def = original;
  absl::StatusOr<int> fused = FuseEmbeddingBags(&def);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, 2);
  EXPECT_EQ(OpTypes(def), (std::vector<std::string>{"Gather", "Gather", "Concat"}));
  EXPECT_EQ(def.nodes[0].inputs, (std::vector<std::string>{"table0", "ids"}));
  EXPECT_EQ(def.nodes[1].outputs, std::vector<std::string>{"bag1"});
  EXPECT_EQ(std::get<int64_t>(def.nodes[1].attrs.at(kernels::kFusedBagSelectAttr)), 1)
      << "the pick of the last feature, -1, normalized";
  ASSERT_TRUE(Graph::Build(def).ok());
  for (Device device : kernels::testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    absl::StatusOr<HostTensor> want = RunDef(original, device, {GoodIds()});
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<HostTensor> got = RunDef(def, device, {GoodIds()});
    ASSERT_TRUE(got.ok()) << got.status();
    // The same additions in the same order on the CPU; CUDA's ReduceMean may sum in
    // another order.
    const double tol = device.is_cuda() ? 1e-6 : 0;
    EXPECT_TRUE(AllClose(*got, *want, tol, tol));
  }
}

TEST(FuseEmbeddingBagsTest, FoldsABagOfTwoDimensionalIds) {
  GraphDef def;
  def.name = "bag";
  def.opset = 13;
  def.inputs.push_back({"ids", DType::kInt32, {-1, 3}});
  def.outputs.push_back({"y", DType::kFp32, {-1, 4}});
  def.initializers.push_back(Fp32Init("table", {6, 4}, RandomFloats(24, 9)));
  def.nodes.push_back({"lookup", "Gather", "", {"table", "ids"}, {"rows"}, {}});
  def.nodes.push_back({"bag",
                       "ReduceMean",
                       "",
                       {"rows"},
                       {"y"},
                       {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}});
  const GraphDef original = def;
  absl::StatusOr<int> fused = FuseEmbeddingBags(&def);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(*fused, 1);
  EXPECT_EQ(OpTypes(def), std::vector<std::string>{"Gather"});
  EXPECT_FALSE(def.nodes[0].attrs.contains(kernels::kFusedBagSelectAttr));
  const HostTensor ids = Ids<int32_t>({2, 3}, {5, 0, -1, 2, 2, 3});
  for (Device device : kernels::testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    absl::StatusOr<HostTensor> want = RunDef(original, device, {ids});
    ASSERT_TRUE(want.ok()) << want.status();
    absl::StatusOr<HostTensor> got = RunDef(def, device, {ids});
    ASSERT_TRUE(got.ok()) << got.status();
    const double tol = device.is_cuda() ? 1e-6 : 0;
    EXPECT_TRUE(AllClose(*got, *want, tol, tol));
  }
}

TEST(FuseEmbeddingBagsTest, ABadIdIsTheSameErrorFusedOrNot) {
  const GraphDef original = TwoFeatureBags();
  GraphDef def = original;
  ASSERT_TRUE(FuseEmbeddingBags(&def).ok());
  HostTensor ids = GoodIds();
  // Row 2, feature 1, third id: 7 is past table1's 7 rows (feature 0 is fine).
  reinterpret_cast<int64_t*>(ids.bytes.data())[2 * 8 + 4 + 2] = 7;
  for (Device device : kernels::testing::TestDevices()) {
    SCOPED_TRACE(device.ToString());
    absl::StatusOr<HostTensor> want = RunDef(original, device, {ids});
    absl::StatusOr<HostTensor> got = RunDef(def, device, {ids});
    EXPECT_EQ(want.status().code(), absl::StatusCode::kInvalidArgument) << want.status();
    EXPECT_EQ(got.status(), want.status());
  }
}

TEST(FuseEmbeddingBagsTest, LeavesWhatItCannotFoldExactly) {
  // Each edit spoils feature 0's bag; feature 1's still folds, unless the edit spoils
  // the input both read (then `folded` is 0).
  struct Case {
    std::string why;
    void (*edit)(GraphDef*);
    int folded = 1;
  };
  const std::vector<Case> cases = {
      {"keepdims 1", [](GraphDef* d) { d->nodes[2].attrs["keepdims"] = int64_t{1}; }},
      {"another axis", [](GraphDef* d) { d->nodes[2].attrs["axes"] = std::vector<int64_t>{2}; }},
      {"rows read elsewhere", [](GraphDef* d) { d->outputs.push_back({"rows0"}); }},
      {"ids read elsewhere", [](GraphDef* d) { d->outputs.push_back({"ids0"}); }},
      {"table not an initializer",
       [](GraphDef* d) {
         d->initializers.erase(d->initializers.begin());
         d->inputs.push_back({"table0", DType::kFp32, {10, 5}});
       }},
      {"features not fixed", [](GraphDef* d) { d->inputs[0].dims[1] = -1; }, 0},
      {"pick outside the features", [](GraphDef* d) { d->initializers[1] = IndexInit("f0", 2); }},
      {"pick on axis 2", [](GraphDef* d) { d->nodes[0].attrs["axis"] = int64_t{2}; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    GraphDef def = TwoFeatureBags();
    c.edit(&def);
    absl::StatusOr<int> fused = FuseEmbeddingBags(&def);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(*fused, c.folded);
    EXPECT_EQ(def.nodes[0].op_type, "Gather");
    EXPECT_EQ(def.nodes[2].op_type, "ReduceMean");
    EXPECT_FALSE(def.nodes[1].attrs.contains(kernels::kFusedBagMeanAttr));
  }
}

TEST(FuseEmbeddingBagsTest, TheRulesCheckAFusedBagsShapes) {
  kernels::AttrMap attrs{{kernels::kFusedBagMeanAttr, int64_t{1}},
                         {kernels::kFusedBagSelectAttr, int64_t{2}}};
  absl::StatusOr<kernels::OpAttrs> a = kernels::BuildOpAttrs(kernels::OpKind::kGather, 13, attrs);
  ASSERT_TRUE(a.ok()) << a.status();
  const kernels::TensorDesc table{DType::kFp32, {10, 5}};
  absl::StatusOr<std::vector<kernels::TensorDesc>> out =
      kernels::InferOutputs(kernels::OpKind::kGather, {table, {DType::kInt64, {3, 4, 8}}}, *a);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape, (kernels::Shape{3, 5}));
  out = kernels::InferOutputs(kernels::OpKind::kGather, {table, {DType::kInt64, {3, 2, 8}}}, *a);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("more than 2 features"), absl::string_view::npos)
      << out.status();
}

}  // namespace
}  // namespace ndserve::engine
