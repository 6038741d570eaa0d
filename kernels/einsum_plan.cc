#include "kernels/einsum_plan.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ndserve::kernels {
namespace {

absl::Status Invalid(const EinsumAttrs& a, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("Einsum '", a.equation, "': ", message));
}

// Positions of `want`'s letters in `term`, or empty when `want` is `term` already.
Shape PermTo(const std::string& term, const std::string& want) {
  if (term == want) return {};
  Shape perm;
  for (char c : want) perm.push_back(static_cast<int64_t>(term.find(c)));
  return perm;
}

}  // namespace

absl::StatusOr<EinsumPlan> MakeEinsumPlan(const EinsumAttrs& a,
                                          absl::Span<const TensorDesc> inputs) {
  if (inputs.size() != a.inputs.size()) {
    return Invalid(a, absl::StrFormat("the equation has %d operands, the node %d inputs",
                                      a.inputs.size(), inputs.size()));
  }
  std::array<int64_t, 128> size;
  size.fill(-1);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string& term = a.inputs[i];
    const ShapeSpan shape = inputs[i].shape;
    if (shape.size() != term.size()) {
      return Invalid(a, absl::StrFormat("operand %d has shape %s, the equation gives it rank %d", i,
                                        ShapeToString(shape), term.size()));
    }
    for (std::size_t d = 0; d < term.size(); ++d) {
      int64_t& s = size[static_cast<unsigned char>(term[d])];
      if (s >= 0 && s != shape[d]) {
        return Invalid(a, absl::StrFormat("letter '%c' has size %d and %d", term[d], s, shape[d]));
      }
      s = shape[d];
    }
  }
  EinsumPlan p;
  p.num_inputs = static_cast<int>(inputs.size());
  for (char c : a.output) {
    if (size[static_cast<unsigned char>(c)] < 0) {
      return Invalid(a, absl::StrFormat("output letter '%c' is in no operand", c));
    }
    p.out_shape.push_back(size[static_cast<unsigned char>(c)]);
  }
  auto unsupported = [&](absl::string_view what) {
    return absl::UnimplementedError(absl::StrCat("Einsum '", a.equation, "': ", what,
                                                 " (supported: transposes of one operand and "
                                                 "batched matrix products of two)"));
  };
  if (p.num_inputs == 1) {
    if (a.inputs[0].size() != a.output.size()) return unsupported("sums over one operand");
    p.out_perm = PermTo(a.inputs[0], a.output);
    p.mid_shape = inputs[0].shape;
    return p;
  }
  const std::string& ta = a.inputs[0];
  const std::string& tb = a.inputs[1];
  std::string batch, m, n, k;
  for (char c : a.output) {
    const bool in_a = ta.find(c) != std::string::npos, in_b = tb.find(c) != std::string::npos;
    (in_a && in_b ? batch : in_a ? m : n) += c;
  }
  for (char c : ta) {
    if (a.output.find(c) != std::string::npos) continue;
    if (tb.find(c) == std::string::npos) return unsupported("a letter summed within operand 0");
    k += c;
  }
  for (char c : tb) {
    if (a.output.find(c) == std::string::npos && ta.find(c) == std::string::npos) {
      return unsupported("a letter summed within operand 1");
    }
  }
  auto product = [&](const std::string& letters) {
    int64_t v = 1;
    for (char c : letters) v *= size[static_cast<unsigned char>(c)];
    return v;
  };
  p.batch = product(batch);
  p.m = product(m);
  p.n = product(n);
  p.k = product(k);
  const std::string mid = batch + m + n;
  for (char c : mid) p.mid_shape.push_back(size[static_cast<unsigned char>(c)]);
  p.out_perm = PermTo(mid, a.output);  // output dim j is mid dim out_perm[j]
  if (ta == batch + k + m && !(ta == batch + m + k)) {
    p.a.transposed = true;
  } else {
    p.a.perm = PermTo(ta, batch + m + k);
  }
  if (tb == batch + n + k && !(tb == batch + k + n)) {
    p.b.transposed = true;
  } else {
    p.b.perm = PermTo(tb, batch + k + n);
  }
  return p;
}

}  // namespace ndserve::kernels
