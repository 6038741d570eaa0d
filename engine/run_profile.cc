#include "engine/run_profile.h"

#include <algorithm>
#include <atomic>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ndserve::engine {
namespace {

std::atomic<RunProfile*> active_profile{nullptr};

double Numel(kernels::ShapeSpan s) {
  double n = 1;
  for (int64_t d : s) n *= static_cast<double>(d);
  return n;
}

std::string ShapeText(kernels::ShapeSpan s) { return s.empty() ? "scalar" : absl::StrJoin(s, "x"); }

}  // namespace

double NodeFlops(kernels::OpKind op, absl::Span<const kernels::ShapeSpan> inputs,
                 absl::Span<const kernels::ShapeSpan> outputs) {
  if (inputs.size() < 2 || outputs.empty()) return 0;
  const kernels::ShapeSpan a = inputs[0], b = inputs[1], y = outputs[0];
  switch (op) {
    case kernels::OpKind::kConv:  // each output element: C/group x kernel taps
      return b.size() < 2 ? 0 : 2 * Numel(y) * Numel(b.subspan(1));
    case kernels::OpKind::kConvTranspose:  // each input element: M/group x kernel taps
      return b.size() < 2 ? 0 : 2 * Numel(a) * Numel(b.subspan(1));
    case kernels::OpKind::kGemm:  // Y [M x N], A M x K in either order
      return y.size() != 2 || y[0] == 0 ? 0 : 2 * Numel(y) * (Numel(a) / y[0]);
    case kernels::OpKind::kMatMul:
      return a.empty() ? 0 : 2 * Numel(y) * a.back();
    default:
      return 0;
  }
}

void RunProfile::RecordNode(const Node& node, absl::Span<const kernels::ShapeSpan> inputs,
                            absl::Span<const kernels::ShapeSpan> outputs, double seconds) {
  std::string shapes;
  for (kernels::ShapeSpan s : inputs)
    absl::StrAppend(&shapes, shapes.empty() ? "" : " ", ShapeText(s));
  absl::StrAppend(&shapes, " ->");
  for (kernels::ShapeSpan s : outputs) absl::StrAppend(&shapes, " ", ShapeText(s));
  const std::string key = absl::StrCat(node.name, "|", shapes);
  absl::MutexLock lock(&mu_);
  auto [it, added] = index_.try_emplace(key, static_cast<int>(nodes_.size()));
  if (added) {
    nodes_.push_back({node.name, std::string(kernels::OpKindName(node.op)), std::move(shapes),
                      NodeFlops(node.op, inputs, outputs)});
  }
  NodeStat& stat = nodes_[it->second];
  stat.seconds += seconds;
  ++stat.calls;
}

void RunProfile::RecordRun(double seconds) {
  absl::MutexLock lock(&mu_);
  run_seconds_ += seconds;
  ++runs_;
}

std::vector<RunProfile::NodeStat> RunProfile::Nodes() const {
  absl::MutexLock lock(&mu_);
  return nodes_;
}

int64_t RunProfile::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

std::string RunProfile::Report(int top) const {
  std::vector<NodeStat> nodes;
  double run_seconds;
  int64_t runs;
  {
    absl::MutexLock lock(&mu_);
    nodes = nodes_;
    run_seconds = run_seconds_;
    runs = runs_;
  }
  if (runs == 0) return "no runs recorded\n";
  const double per_run = run_seconds / runs;
  struct Kind {
    double seconds = 0, flops = 0;
    int64_t nodes = 0;
  };
  std::map<std::string, Kind> kinds;
  double node_seconds = 0;
  for (const NodeStat& n : nodes) {
    Kind& k = kinds[n.op];
    k.seconds += n.seconds;
    k.flops += n.flops * n.calls;
    ++k.nodes;
    node_seconds += n.seconds;
  }
  std::vector<std::pair<std::string, Kind>> by_kind(kinds.begin(), kinds.end());
  std::sort(by_kind.begin(), by_kind.end(),
            [](const auto& x, const auto& y) { return x.second.seconds > y.second.seconds; });
  std::string out = absl::StrFormat("%d runs, %.3f ms per run; nodes %.1f %% of it\n\n", runs,
                                    per_run * 1e3, 100 * node_seconds / run_seconds);
  absl::StrAppend(&out,
                  "| op | nodes | ms per run | share | GFLOP/s |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [op, k] : by_kind) {
    absl::StrAppendFormat(&out, "| %s | %d | %.3f | %.1f %% | %s |\n", op, k.nodes,
                          k.seconds / runs * 1e3, 100 * k.seconds / run_seconds,
                          k.flops > 0 ? absl::StrFormat("%.1f", k.flops / k.seconds * 1e-9) : "");
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeStat& x, const NodeStat& y) { return x.seconds > y.seconds; });
  if (static_cast<int>(nodes.size()) > top) nodes.resize(top);
  absl::StrAppend(&out, "\n| node | op | shapes | ms per run | share | GFLOP/s |\n",
                  "|---|---|---|---:|---:|---:|\n");
  for (const NodeStat& n : nodes) {
    absl::StrAppendFormat(
        &out, "| %s | %s | %s | %.3f | %.1f %% | %s |\n", n.name, n.op, n.shapes,
        n.seconds / runs * 1e3, 100 * n.seconds / run_seconds,
        n.flops > 0 ? absl::StrFormat("%.1f", n.flops * n.calls / n.seconds * 1e-9) : "");
  }
  return out;
}

void SetActiveRunProfile(RunProfile* profile) {
  active_profile.store(profile, std::memory_order_release);
}

RunProfile* ActiveRunProfile() { return active_profile.load(std::memory_order_acquire); }

}  // namespace ndserve::engine
