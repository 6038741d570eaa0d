#include "kernels/conv_geometry.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ndserve::kernels {
namespace {

// One spatial dim's parameters and results.
struct Dim {
  int64_t in = 0, k = 1, stride = 1, dil = 1, pad_begin = 0, pad_end = 0, out = 0;
  int64_t out_pad = 0;     // ConvTranspose output_padding
  int64_t out_shape = -1;  // ConvTranspose output_shape, -1 when not given
};

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

absl::Status CheckLength(absl::string_view op, absl::string_view name,
                         const std::vector<int64_t>& v, std::size_t want) {
  if (v.empty() || v.size() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: '%s' has %d values, expected %d", op, name, v.size(), want));
}

// Fills every dim's parameters from the attribute lists (defaults where they are empty).
absl::StatusOr<std::vector<Dim>> ReadDims(absl::string_view op, ShapeSpan x_spatial,
                                          ShapeSpan k_spatial, const std::vector<int64_t>& strides,
                                          const std::vector<int64_t>& pads,
                                          const std::vector<int64_t>& dilations) {
  const std::size_t r = x_spatial.size();
  if (r == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": X needs at least one spatial dim (N, C, spatial...)"));
  }
  if (r > 3) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": only 1-D, 2-D and 3-D spatial inputs are supported, got ", r, " spatial dims"));
  }
  if (k_spatial.size() != r) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel has ", k_spatial.size(), " spatial dims, X has ", r));
  }
  for (auto [name, v, n] :
       {std::tuple<const char*, const std::vector<int64_t>*, std::size_t>{"strides", &strides, r},
        {"pads", &pads, 2 * r},
        {"dilations", &dilations, r}}) {
    absl::Status s = CheckLength(op, name, *v, n);
    if (!s.ok()) return s;
  }
  std::vector<Dim> dims(r);
  for (std::size_t i = 0; i < r; ++i) {
    Dim& d = dims[i];
    d.in = x_spatial[i];
    d.k = k_spatial[i];
    d.stride = strides.empty() ? 1 : strides[i];
    d.dil = dilations.empty() ? 1 : dilations[i];
    d.pad_begin = pads.empty() ? 0 : pads[i];
    d.pad_end = pads.empty() ? 0 : pads[i + r];
    if (d.k < 1 || d.stride < 1 || d.dil < 1 || d.pad_begin < 0 || d.pad_end < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: spatial dim %d has kernel %d, stride %d, dilation %d, pads %d/%d; kernel, "
          "stride and dilation must be >= 1 and pads >= 0",
          op, i, d.k, d.stride, d.dil, d.pad_begin, d.pad_end));
    }
  }
  return dims;
}

// Forward (Conv, pooling) output size and padding of one dim.
absl::Status ForwardDim(absl::string_view op, AutoPad auto_pad, bool ceil_mode, std::size_t i,
                        Dim& d) {
  const int64_t span = (d.k - 1) * d.dil + 1;  // the dilated window
  if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
    d.out = CeilDiv(d.in, d.stride);
    const int64_t total = std::max<int64_t>(0, (d.out - 1) * d.stride + span - d.in);
    const int64_t small = total / 2, large = total - total / 2;
    // SAME_UPPER puts the odd pixel at the end, SAME_LOWER at the beginning.
    d.pad_begin = auto_pad == AutoPad::kSameUpper ? small : large;
    d.pad_end = auto_pad == AutoPad::kSameUpper ? large : small;
  } else {
    if (auto_pad == AutoPad::kValid) d.pad_begin = d.pad_end = 0;
    const int64_t room = d.in + d.pad_begin + d.pad_end - span;
    if (room < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: spatial dim %d of size %d (pads %d/%d) is smaller than the dilated kernel %d", op, i,
          d.in, d.pad_begin, d.pad_end, span));
    }
    if (ceil_mode && auto_pad == AutoPad::kNotSet) {
      d.out = CeilDiv(room, d.stride) + 1;
      // A last window that would start in the end padding is dropped (as PyTorch and
      // onnxruntime do): every window must cover at least one input or begin pad.
      if ((d.out - 1) * d.stride >= d.in + d.pad_begin) --d.out;
    } else {
      d.out = room / d.stride + 1;
    }
  }
  return absl::OkStatus();
}

// ConvTranspose output size and padding of one dim.
absl::Status TransposeDim(absl::string_view op, AutoPad auto_pad, std::size_t i, Dim& d) {
  const int64_t span = (d.k - 1) * d.dil + 1;
  if (d.out_pad < 0 || (d.out_pad >= d.stride && d.out_pad >= d.dil)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: output_padding %d of spatial dim %d must be >= 0 and less than the stride (%d) or "
        "the dilation (%d)",
        op, d.out_pad, i, d.stride, d.dil));
  }
  const int64_t full = d.stride * (d.in - 1) + d.out_pad + span;  // output before padding
  int64_t target = d.out_shape;
  if (target < 0 && (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower)) {
    target = d.in * d.stride;
  }
  if (target >= 0) {
    const int64_t total = full - target;
    if (total < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: output size %d of spatial dim %d exceeds the %d the input, strides and kernel "
          "reach",
          op, target, i, full));
    }
    // As the ONNX definition states: SAME_UPPER pads the odd pixel at the end, anything
    // else at the beginning.
    d.pad_begin = auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    d.pad_end = total - d.pad_begin;
    d.out = target;
  } else {
    if (auto_pad == AutoPad::kValid) d.pad_begin = d.pad_end = 0;
    d.out = full - d.pad_begin - d.pad_end;
    if (d.out < 0 || d.in == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: spatial dim %d of size %d gives output size %d (pads %d/%d)", op, i,
                          d.in, d.out, d.pad_begin, d.pad_end));
    }
  }
  return absl::OkStatus();
}

ConvGeometry ToGeometry(const std::vector<Dim>& dims) {
  ConvGeometry g;
  g.spatial_rank = static_cast<int>(dims.size());
  const Dim unit{1, 1, 1, 1, 0, 0, 1};
  const std::size_t r = dims.size();
  const Dim& d = r == 3 ? dims[0] : unit;
  const Dim& h = r >= 2 ? dims[r - 2] : unit;
  const Dim& w = dims.back();
  g.in_d = d.in, g.in_h = h.in, g.in_w = w.in;
  g.k_d = d.k, g.k_h = h.k, g.k_w = w.k;
  g.stride_d = d.stride, g.stride_h = h.stride, g.stride_w = w.stride;
  g.dil_d = d.dil, g.dil_h = h.dil, g.dil_w = w.dil;
  g.pad_front = d.pad_begin, g.pad_back = d.pad_end;
  g.pad_top = h.pad_begin, g.pad_bottom = h.pad_end;
  g.pad_left = w.pad_begin, g.pad_right = w.pad_end;
  g.out_d = d.out, g.out_h = h.out, g.out_w = w.out;
  return g;
}

}  // namespace

absl::StatusOr<ConvGeometry> MakeConvGeometry(absl::string_view op, const ConvAttrs& attrs,
                                              ShapeSpan x_spatial, ShapeSpan k_spatial,
                                              bool transpose) {
  absl::StatusOr<std::vector<Dim>> dims =
      ReadDims(op, x_spatial, k_spatial, attrs.strides, attrs.pads, attrs.dilations);
  if (!dims.ok()) return dims.status();
  const std::size_t r = dims->size();
  if (!attrs.kernel_shape.empty() &&
      !std::equal(attrs.kernel_shape.begin(), attrs.kernel_shape.end(), k_spatial.begin(),
                  k_spatial.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel_shape [", absl::StrJoin(attrs.kernel_shape, ","),
                     "] differs from W's spatial dims ", ShapeToString(k_spatial)));
  }
  if (!transpose && (!attrs.output_padding.empty() || !attrs.output_shape.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": output_padding and output_shape are ConvTranspose attributes"));
  }
  absl::Status s = CheckLength(op, "output_padding", attrs.output_padding, r);
  if (!s.ok()) return s;
  // output_shape may also be written with the N and C dims in front.
  std::vector<int64_t> out_shape = attrs.output_shape;
  if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  s = CheckLength(op, "output_shape", out_shape, r);
  if (!s.ok()) return s;
  for (std::size_t i = 0; i < r; ++i) {
    Dim& d = (*dims)[i];
    if (transpose) {
      d.out_pad = attrs.output_padding.empty() ? 0 : attrs.output_padding[i];
      d.out_shape = out_shape.empty() ? -1 : out_shape[i];
      s = TransposeDim(op, attrs.auto_pad, i, d);
    } else {
      s = ForwardDim(op, attrs.auto_pad, /*ceil_mode=*/false, i, d);
    }
    if (!s.ok()) return s;
  }
  return ToGeometry(*dims);
}

absl::StatusOr<ConvGeometry> MakePoolGeometry(absl::string_view op, const PoolAttrs& attrs,
                                              ShapeSpan x_spatial) {
  if (attrs.kernel_shape.size() != x_spatial.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": kernel_shape has ",
                                                   attrs.kernel_shape.size(), " values, X has ",
                                                   x_spatial.size(), " spatial dims"));
  }
  absl::StatusOr<std::vector<Dim>> dims =
      ReadDims(op, x_spatial, attrs.kernel_shape, attrs.strides, attrs.pads, attrs.dilations);
  if (!dims.ok()) return dims.status();
  for (std::size_t i = 0; i < dims->size(); ++i) {
    Dim& d = (*dims)[i];
    if (d.pad_begin >= (d.k - 1) * d.dil + 1 || d.pad_end >= (d.k - 1) * d.dil + 1) {
      // A window entirely in the padding has no input to pool.
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: pads %d/%d of spatial dim %d must be smaller than the kernel %d", op,
                          d.pad_begin, d.pad_end, i, (d.k - 1) * d.dil + 1));
    }
    absl::Status s = ForwardDim(op, attrs.auto_pad, attrs.ceil_mode, i, d);
    if (!s.ok()) return s;
  }
  return ToGeometry(*dims);
}

}  // namespace ndserve::kernels
