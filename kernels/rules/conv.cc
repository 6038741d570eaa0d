// Rules of Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
// BatchNormalization and InstanceNormalization: NCHW (or NCW) FP32 tensors; the spatial
// arithmetic is kernels/conv_geometry.h's.
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/conv_geometry.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {
namespace {

absl::StatusOr<AutoPad> ReadAutoPad(OpKind op, const AttrMap& attrs) {
  NDS_ASSIGN_OR_RETURN(const std::string s, GetAttr<std::string>(op, attrs, "auto_pad", "NOTSET"));
  if (s == "NOTSET") return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return Invalid(op, absl::StrCat("unknown auto_pad '", s, "'"));
}

using Ints = std::vector<int64_t>;

bool IsTranspose(OpKind op) { return op == OpKind::kConvTranspose; }

// The fused activation (kernels/conv_activation.h) a Conv node carries, if any.
absl::StatusOr<ConvEpilogue> ReadActivation(OpKind op, const AttrMap& attrs) {
  ConvEpilogue e;
  NDS_ASSIGN_OR_RETURN(const std::string kind,
                       GetAttr<std::string>(op, attrs, kConvActivationAttr, ""));
  if (kind.empty()) return e;
  if (IsTranspose(op)) {
    return Invalid(op, absl::StrCat("attribute '", kConvActivationAttr, "' is Conv's only"));
  }
  if (kind == "Relu") {
    e.kind = ConvActivation::kRelu;
  } else if (kind == "Clip") {
    e.kind = ConvActivation::kClip;
    NDS_ASSIGN_OR_RETURN(e.lo, GetAttr<float>(op, attrs, kConvActivationMinAttr, e.lo));
    NDS_ASSIGN_OR_RETURN(e.hi, GetAttr<float>(op, attrs, kConvActivationMaxAttr, e.hi));
    if (std::isnan(e.lo) || std::isnan(e.hi)) return Invalid(op, "a Clip bound is NaN");
  } else if (kind == "HardSwish") {
    e.kind = ConvActivation::kHardSwish;
  } else if (kind == "Sigmoid") {
    e.kind = ConvActivation::kSigmoid;
  } else if (kind == "Silu") {
    e.kind = ConvActivation::kSilu;
  } else {
    return absl::UnimplementedError(
        absl::StrCat(OpKindName(op), ": fused activation '", kind,
                     "' is not one of Relu, Clip, HardSwish, Sigmoid, Silu"));
  }
  return e;
}

// X as (N, C, spatial...) with 1, 2 or 3 spatial dims.
absl::Status CheckSpatialInput(OpKind op, const TensorDesc& x) {
  if (x.shape.size() < 3) {
    return Invalid(op, absl::StrCat("X must be (N, C, spatial...), got ", ShapeToString(x.shape)));
  }
  if (x.shape.size() > 5) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: only 1-D, 2-D and 3-D inputs are supported, X has shape %s",
                        OpKindName(op), ShapeToString(x.shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckAllFp32(OpKind op, absl::Span<const TensorDesc> in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], i, {DType::kFp32}));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpAttrs> BuildConv(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ConvAttrs a;
  NDS_ASSIGN_OR_RETURN(a.kernel_shape, GetAttr<Ints>(op, attrs, "kernel_shape", {}));
  NDS_ASSIGN_OR_RETURN(a.strides, GetAttr<Ints>(op, attrs, "strides", {}));
  NDS_ASSIGN_OR_RETURN(a.pads, GetAttr<Ints>(op, attrs, "pads", {}));
  NDS_ASSIGN_OR_RETURN(a.dilations, GetAttr<Ints>(op, attrs, "dilations", {}));
  NDS_ASSIGN_OR_RETURN(a.group, GetAttr<int64_t>(op, attrs, "group", 1));
  NDS_ASSIGN_OR_RETURN(a.auto_pad, ReadAutoPad(op, attrs));
  NDS_ASSIGN_OR_RETURN(a.activation, ReadActivation(op, attrs));
  if (IsTranspose(op)) {
    NDS_ASSIGN_OR_RETURN(a.output_padding, GetAttr<Ints>(op, attrs, "output_padding", {}));
    NDS_ASSIGN_OR_RETURN(a.output_shape, GetAttr<Ints>(op, attrs, "output_shape", {}));
  }
  if (a.group < 1) return Invalid(op, absl::StrCat("group must be >= 1, got ", a.group));
  return a;
}

// Conv: X (N, C, spatial), W (M, C/group, k...), B (M). ConvTranspose: W (C, M/group, k...),
// output (N, M, spatial').
absl::StatusOr<Descs> InferConv(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const ConvAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 3));
  NDS_RETURN_IF_ERROR(CheckAllFp32(op, in));
  const ShapeSpan x = in[0].shape, w = in[1].shape;
  NDS_RETURN_IF_ERROR(CheckSpatialInput(op, in[0]));
  if (w.size() != x.size()) {
    return Invalid(
        op, absl::StrCat("W ", ShapeToString(w), " must have the rank of X ", ShapeToString(x)));
  }
  const bool transpose = IsTranspose(op);
  const int64_t c = x[1];
  int64_t m;
  if (transpose) {
    if (w[0] != c || c % a->group != 0) {
      return Invalid(op, absl::StrFormat("W %s does not fit X %s with group %d: W[0] must be C "
                                         "and C divisible by group",
                                         ShapeToString(w), ShapeToString(x), a->group));
    }
    m = w[1] * a->group;
  } else {
    if (w[1] * a->group != c || w[0] % a->group != 0) {
      return Invalid(op, absl::StrFormat("W %s does not fit X %s with group %d: W[1] * group "
                                         "must be C and W[0] divisible by group",
                                         ShapeToString(w), ShapeToString(x), a->group));
    }
    m = w[0];
  }
  if (in.size() == 3 && (in[2].shape.size() != 1 || in[2].shape[0] != m)) {
    return Invalid(
        op, absl::StrCat("B has shape ", ShapeToString(in[2].shape), ", expected [", m, "]"));
  }
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g,
                       MakeConvGeometry(OpKindName(op), *a, x.subspan(2), w.subspan(2), transpose));
  Shape out = {x[0], m};
  if (g.spatial_rank == 3) out.push_back(g.out_d);
  if (g.spatial_rank >= 2) out.push_back(g.out_h);
  out.push_back(g.out_w);
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<OpAttrs> BuildPool(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  PoolAttrs a;
  NDS_ASSIGN_OR_RETURN(a.kernel_shape, RequireAttr<Ints>(op, attrs, "kernel_shape"));
  NDS_ASSIGN_OR_RETURN(a.strides, GetAttr<Ints>(op, attrs, "strides", {}));
  NDS_ASSIGN_OR_RETURN(a.pads, GetAttr<Ints>(op, attrs, "pads", {}));
  NDS_ASSIGN_OR_RETURN(a.dilations, GetAttr<Ints>(op, attrs, "dilations", {}));
  NDS_ASSIGN_OR_RETURN(a.auto_pad, ReadAutoPad(op, attrs));
  NDS_ASSIGN_OR_RETURN(a.ceil_mode, GetBoolAttr(op, attrs, "ceil_mode", false));
  if (op == OpKind::kAveragePool) {
    NDS_ASSIGN_OR_RETURN(a.count_include_pad, GetBoolAttr(op, attrs, "count_include_pad", false));
    if (!a.dilations.empty()) {
      for (int64_t d : a.dilations) {
        if (d != 1) {
          // AveragePool has dilations only from opset 19.
          return Invalid(op, "dilations are not an AveragePool attribute before opset 19");
        }
      }
    }
  }
  if (op == OpKind::kMaxPool) {
    NDS_ASSIGN_OR_RETURN(const int64_t order, GetAttr<int64_t>(op, attrs, "storage_order", 0));
    if (order != 0) {
      return absl::UnimplementedError(
          "MaxPool: storage_order 1 (column-major Indices) is not supported");
    }
  }
  return a;
}

// MaxPool gives Y and, as a second output, Indices (INT64, row-major flat offsets into X).
absl::StatusOr<Descs> InferPool(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const PoolAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckAllFp32(op, in));
  NDS_RETURN_IF_ERROR(CheckSpatialInput(op, in[0]));
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g, MakePoolGeometry(OpKindName(op), *a, x.subspan(2)));
  Shape out = {x[0], x[1]};
  if (g.spatial_rank == 3) out.push_back(g.out_d);
  if (g.spatial_rank >= 2) out.push_back(g.out_h);
  out.push_back(g.out_w);
  if (op == OpKind::kMaxPool) return Descs{{DType::kFp32, out}, {DType::kInt64, out}};
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<OpAttrs> BuildGlobalPool(OpKind op, int opset, const AttrMap& attrs,
                                        const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

// (N, C, spatial...) -> (N, C, 1...): any number of spatial dims.
absl::StatusOr<Descs> InferGlobalPool(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckAllFp32(op, in));
  const ShapeSpan x = in[0].shape;
  if (x.size() < 3) {
    return Invalid(op, absl::StrCat("X must be (N, C, spatial...), got ", ShapeToString(x)));
  }
  if (NumElements(x.subspan(2)) == 0 && NumElements(x.subspan(0, 2)) != 0) {
    return Invalid(op,
                   absl::StrCat("cannot pool over the empty spatial dims of X ", ShapeToString(x)));
  }
  Shape out(x.begin(), x.end());
  for (std::size_t i = 2; i < out.size(); ++i) out[i] = 1;
  return Descs{{DType::kFp32, out}};
}

// Inputs 1.. of a normalization are one value per channel: shape [C] of X (N, C, ...).
// names[i] is input i's name in the ONNX definition.
absl::Status CheckPerChannel(OpKind op, absl::Span<const TensorDesc> in,
                             absl::Span<const char* const> names) {
  const ShapeSpan x = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (in[i].shape.size() != 1 || in[i].shape[0] != x[1]) {
      return Invalid(
          op, absl::StrCat(names[i], " has shape ", ShapeToString(in[i].shape), ", expected [",
                           x[1], "] (", names[0], " ", ShapeToString(x), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OpAttrs> BuildBatchNorm(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  BatchNormAttrs a;
  NDS_ASSIGN_OR_RETURN(a.epsilon, GetAttr<float>(op, attrs, "epsilon", 1e-5f));
  NDS_ASSIGN_OR_RETURN(const bool training, GetBoolAttr(op, attrs, "training_mode", false));
  if (training) {
    return absl::UnimplementedError(
        "BatchNormalization: training_mode 1 is not supported (inference only)");
  }
  return a;
}

// X (N, C, ...), scale/B/mean/var (C). Only Y: the running statistics outputs exist in
// training mode only.
absl::StatusOr<Descs> InferBatchNorm(OpKind op, absl::Span<const TensorDesc> in,
                                     const OpAttrs& attrs) {
  const BatchNormAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 5, 5));
  NDS_RETURN_IF_ERROR(CheckAllFp32(op, in));
  const ShapeSpan x = in[0].shape;
  if (x.size() < 2) {
    return Invalid(op, absl::StrCat("X must be (N, C, ...), got ", ShapeToString(x)));
  }
  static constexpr const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  NDS_RETURN_IF_ERROR(CheckPerChannel(op, in, kNames));
  return Descs{in[0]};
}

// InstanceNormalization carries only epsilon, as BatchNormalization does, so it shares
// that struct. PyTorch exports GroupNorm as Reshape -> InstanceNormalization (unit scale,
// zero bias) -> Reshape -> Mul -> Add, and InstanceNorm1d/2d/3d directly.
absl::StatusOr<OpAttrs> BuildInstanceNorm(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  BatchNormAttrs a;
  NDS_ASSIGN_OR_RETURN(a.epsilon, GetAttr<float>(op, attrs, "epsilon", 1e-5f));
  return a;
}

// X (N, C, D1, ...), scale and B (C): Y like X, each (n, c) plane normalized by its own
// statistics.
absl::StatusOr<Descs> InferInstanceNorm(OpKind op, absl::Span<const TensorDesc> in,
                                        const OpAttrs& attrs) {
  const BatchNormAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, 3));
  NDS_RETURN_IF_ERROR(CheckAllFp32(op, in));
  const ShapeSpan x = in[0].shape;
  if (x.size() < 3) {
    return Invalid(op, absl::StrCat("X must be (N, C, D1, ...), got ", ShapeToString(x)));
  }
  static constexpr const char* kNames[] = {"input", "scale", "B"};
  NDS_RETURN_IF_ERROR(CheckPerChannel(op, in, kNames));
  return Descs{in[0]};
}

}  // namespace ndserve::kernels::rules
