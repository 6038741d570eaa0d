#include "kernels/resize_plan.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ndserve::kernels {

absl::StatusOr<ResizePlan> MakeResizePlan(const ResizeAttrs& a, ShapeSpan x) {
  const std::size_t rank = x.size();
  const bool by_sizes = !a.sizes.empty();
  const std::size_t given = by_sizes ? a.sizes.size() : a.scales.size();
  if (rank == 0 || given != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Resize: ", by_sizes ? "sizes" : "scales",
                                                   " has ", given, " values, X ", ShapeToString(x),
                                                   " has rank ", rank));
  }
  ResizePlan p;
  // NCDHW: the three trailing dims; any other rank keeps its last two.
  const std::size_t spatial = rank == 5 ? 3 : std::min<std::size_t>(rank, 2);
  std::vector<float> scales(rank);
  p.out_shape.resize(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    if (by_sizes) {
      if (a.sizes[d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Resize: negative size in [", absl::StrJoin(a.sizes, ","), "]"));
      }
      p.out_shape[d] = a.sizes[d];
      scales[d] = x[d] == 0 ? 1.0f : static_cast<float>(a.sizes[d]) / static_cast<float>(x[d]);
    } else {
      if (!(a.scales[d] > 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat("Resize: scales must be positive, got [",
                                                       absl::StrJoin(a.scales, ","), "]"));
      }
      scales[d] = a.scales[d];
      const double size = std::floor(static_cast<double>(x[d]) * static_cast<double>(a.scales[d]));
      // Converting a double beyond int64's range (or inf) is undefined; 2^62 is far past
      // any size ValidateShape below would accept with another dimension of 2.
      if (!(size < 0x1p62)) {
        return absl::InvalidArgumentError(absl::StrCat("Resize: scale ", a.scales[d], " makes dim ",
                                                       d, " of X ", ShapeToString(x), " too large"));
      }
      p.out_shape[d] = static_cast<int64_t>(size);
    }
    if (d + spatial < rank && p.out_shape[d] != x[d]) {
      return absl::UnimplementedError(absl::StrCat(
          "Resize: only the last ", spatial == 3 ? "three" : "two",
          " dims may be resized; X ", ShapeToString(x), " to ", ShapeToString(p.out_shape)));
    }
  }
  if (absl::Status valid = ValidateShape(p.out_shape, "Resize output"); !valid.ok()) return valid;
  p.in_w = x[rank - 1];
  p.out_w = p.out_shape[rank - 1];
  p.scale_w = scales[rank - 1];
  if (rank >= 2) {
    p.in_h = x[rank - 2];
    p.out_h = p.out_shape[rank - 2];
    p.scale_h = scales[rank - 2];
  }
  if (spatial == 3) {
    p.depth = true;
    p.in_d = x[rank - 3];
    p.out_d = p.out_shape[rank - 3];
    p.scale_d = scales[rank - 3];
    if (a.mode == ResizeMode::kCubic && p.out_d != p.in_d) {
      return absl::UnimplementedError(absl::StrCat(
          "Resize: mode 'cubic' resizes the last two dims only; X ", ShapeToString(x), " to ",
          ShapeToString(p.out_shape)));
    }
  }
  if ((p.out_d > 0 && p.in_d == 0) || (p.out_h > 0 && p.in_h == 0) ||
      (p.out_w > 0 && p.in_w == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("Resize: cannot resize the empty X ",
                                                   ShapeToString(x), " to ",
                                                   ShapeToString(p.out_shape)));
  }
  p.planes = 1;
  for (std::size_t d = 0; d + spatial < rank; ++d) p.planes *= x[d];
  return p;
}

bool IsIdentityResize(const ResizePlan& p) {
  return p.in_d == p.out_d && p.in_h == p.out_h && p.in_w == p.out_w && p.scale_d == 1.0f &&
         p.scale_h == 1.0f && p.scale_w == 1.0f;
}

}  // namespace ndserve::kernels
