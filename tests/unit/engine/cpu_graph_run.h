#ifndef NDSERVE_TESTS_UNIT_ENGINE_CPU_GRAPH_RUN_H_
#define NDSERVE_TESTS_UNIT_ENGINE_CPU_GRAPH_RUN_H_

// Runs a GraphDef below the request layer (Graph, Model, PredictorContext) on the CPU,
// for tests that check a graph's numbers without a repository or a daemon.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/graph.h"
#include "engine/model.h"
#include "engine/predictor_context.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve::engine::testing {

// Builds `def` into a CPU model named `name` with its kernels and opens one request
// context. Each failing step is a test failure and leaves context() null. Owns its memory
// system, model and context (declared in that order, so the context goes first). Not
// thread-safe.
class CpuGraphRun {
 public:
  CpuGraphRun(GraphDef def, const std::string& name) {
    absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
    EXPECT_TRUE(graph.ok()) << graph.status();
    if (!graph.ok()) return;
    signature_.inputs.assign(graph->inputs().begin(), graph->inputs().end());
    signature_.outputs.assign(graph->outputs().begin(), graph->outputs().end());
    for (const Node& node : graph->nodes()) {
      absl::StatusOr<kernels::KernelFn> fn = kernels::Lookup(node.op, Device::Cpu());
      EXPECT_TRUE(fn.ok()) << fn.status();
      kernels_.push_back(fn.value_or(nullptr));
    }
    absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(
        name, 1, *std::move(graph), signature_, ModelConfig(), Device::Cpu(), &memory_);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return;
    model_ = *std::move(model);
    absl::StatusOr<std::shared_ptr<NDManager>> manager =
        model_->manager()->NewSubManager(ManagerLevel::kContext, absl::StrCat("ctx/", name));
    EXPECT_TRUE(manager.ok()) << manager.status();
    if (!manager.ok()) return;
    context_ = std::make_unique<PredictorContext>(*model_, kernels_, kernels::KernelContext::Cpu(),
                                                  nullptr, *std::move(manager));
  }

  // Null when building failed.
  PredictorContext* context() { return context_.get(); }
  const ModelSignature& signature() const { return signature_; }

 private:
  MemorySystem memory_;
  ModelSignature signature_;
  std::vector<kernels::KernelFn> kernels_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<PredictorContext> context_;
};

}  // namespace ndserve::engine::testing

#endif  // NDSERVE_TESTS_UNIT_ENGINE_CPU_GRAPH_RUN_H_
