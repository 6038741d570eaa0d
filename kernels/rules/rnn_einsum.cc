// Rules of Einsum: the equation is parsed here; what it lowers to is einsum_plan.h.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/einsum_plan.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

absl::StatusOr<OpAttrs> BuildEinsum(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  EinsumAttrs a;
  NDS_ASSIGN_OR_RETURN(a.equation, RequireAttr<std::string>(op, attrs, "equation"));
  std::string eq;
  for (char c : a.equation) {
    if (c != ' ') eq += c;
  }
  auto invalid = [&](absl::string_view why) {
    return Invalid(op, absl::StrCat("equation '", a.equation, "': ", why));
  };
  if (eq.find("...") != std::string::npos) {
    return absl::UnimplementedError(
        absl::StrCat("Einsum '", a.equation, "': ellipses ('...') are not supported"));
  }
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  a.inputs = absl::StrSplit(lhs, ',');
  std::map<char, int> uses;
  for (const std::string& term : a.inputs) {
    for (std::size_t i = 0; i < term.size(); ++i) {
      if (!IsLetter(term[i])) return invalid(absl::StrCat("'", term, "' is not a letter term"));
      if (term.find(term[i], i + 1) != std::string::npos) {
        return absl::UnimplementedError(absl::StrCat(
            "Einsum '", a.equation, "': a letter repeated within one operand (diagonal)"));
      }
      ++uses[term[i]];
    }
  }
  if (a.inputs.size() > 2) {
    return absl::UnimplementedError(absl::StrCat("Einsum '", a.equation, "': ", a.inputs.size(),
                                                 " operands (supported: 1 or 2)"));
  }
  if (arrow == std::string::npos) {
    // Implicit output: the letters used once, in alphabetical order.
    for (const auto& [c, count] : uses) {
      if (count == 1) a.output += c;
    }
    std::sort(a.output.begin(), a.output.end());
  } else {
    a.output = eq.substr(arrow + 2);
    for (std::size_t i = 0; i < a.output.size(); ++i) {
      const char c = a.output[i];
      if (!IsLetter(c))
        return invalid(absl::StrCat("output '", a.output, "' is not a letter term"));
      if (a.output.find(c, i + 1) != std::string::npos) {
        return invalid(absl::StrCat("output letter '", std::string(1, c), "' repeats"));
      }
      if (!uses.contains(c)) {
        return invalid(absl::StrCat("output letter '", std::string(1, c), "' is in no operand"));
      }
    }
  }
  return a;
}

absl::StatusOr<Descs> InferEinsum(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const EinsumAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 2));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], i, {DType::kFp32}));
  }
  NDS_ASSIGN_OR_RETURN(const EinsumPlan plan, MakeEinsumPlan(*a, in));
  return Descs{{DType::kFp32, plan.out_shape}};
}

}  // namespace ndserve::kernels::rules
