// If as the loader inlines it (engine/onnx_loader.cc) and the engine runs it
// (PredictorContext::RunIf): tests/fixtures/graphs/if_branches holds a condition computed
// from the data with a nested If in one branch, and a condition computed from the shape
// whose then branch passes an outer value on; every case is one path through them.
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;
using testing::SourceDir;

std::filesystem::path GraphDir() { return SourceDir() / "tests/fixtures/graphs/if_branches"; }

MemorySystem* TestMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

const Node* FindNode(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes()) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

TEST(IfInliningTest, BranchNodesJoinTheGraphGuardedByTheirConditions) {
  absl::StatusOr<Graph> g = LoadOnnxGraph((GraphDir() / "model.onnx").string());
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* outer = FindNode(*g, "by_sign");
  ASSERT_NE(outer, nullptr);
  EXPECT_EQ(outer->op, kernels::OpKind::kIf);
  EXPECT_TRUE(outer->guards.empty());
  ASSERT_EQ(outer->inputs.size(), 3u);  // cond, then's value, else's value
  const int positive = g->FindValue("positive");
  // A then-branch node reads the outer input and its own (renamed) initializer.
  const Node* dbl = FindNode(*g, "by_sign/then/double");
  ASSERT_NE(dbl, nullptr);
  ASSERT_EQ(dbl->guards.size(), 1u);
  EXPECT_EQ(dbl->guards[0], std::make_pair(positive, true));
  EXPECT_EQ(g->values()[dbl->inputs[0]].name, "x");
  EXPECT_EQ(g->values()[dbl->inputs[1]].name, "by_sign/then/two");
  // The nested If's branch runs only when the outer condition is false and its own true.
  const Node* sub = FindNode(*g, "by_sign/else/inner_if/then/sub_w");
  ASSERT_NE(sub, nullptr);
  ASSERT_EQ(sub->guards.size(), 2u);
  EXPECT_EQ(sub->guards[0], std::make_pair(positive, false));
  EXPECT_EQ(sub->guards[1], std::make_pair(g->FindValue("by_sign/else/c2"), true));
  // The Identity of the shape If is gone: its then value is the outer row_sum itself.
  const Node* by_batch = FindNode(*g, "by_batch");
  ASSERT_NE(by_batch, nullptr);
  EXPECT_EQ(g->values()[by_batch->inputs[1]].name, "row_sum");
}

TEST(IfInliningTest, EveryPathMatchesTheReferenceRequestAfterRequest) {
  ModelLoadSpec spec;
  spec.name = "if_branches";
  spec.model_path = (GraphDir() / "model.onnx").string();
  spec.device = Device::Cpu();
  absl::StatusOr<std::shared_ptr<ServedModel>> model = ServedModel::Load(spec, TestMemory());
  ASSERT_TRUE(model.ok()) << model.status();
  int cases = 0;
  // Twice over, so a path taken after another cannot reuse what that one left.
  for (int round = 0; round < 2; ++round) {
    for (const auto& entry : std::filesystem::directory_iterator(GraphDir())) {
      if (!entry.is_directory()) continue;
      const testing::Case c = testing::ReadCase(entry.path());
      absl::StatusOr<InferenceResponse> r = (*model)->Infer(testing::MakeRequest(c, "if_branches"));
      ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
      ASSERT_EQ(r->outputs.size(), c.outputs.size());
      for (size_t i = 0; i < c.outputs.size(); ++i) {
        EXPECT_TRUE(testing::OutputMatches(r->outputs[i], c.outputs[i], c.atol, c.rtol))
            << c.name << " output " << i;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 10);
}

TEST(IfInliningTest, ABranchWithTheWrongOutputCountIsInvalidNamingTheNode) {
  absl::StatusOr<Graph> g =
      LoadOnnxGraph((SourceDir() / "tests/fixtures/bad/if_output_count.onnx").string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("node 'uneven' (If)"));
  EXPECT_THAT(g.status().message(), HasSubstr("else_branch has 2 outputs"));
}

// Loop: tests/unit/engine/loop_test.cc.

}  // namespace
}  // namespace ndserve::engine
