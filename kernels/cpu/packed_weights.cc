#include "kernels/cpu/packed_weights.h"

#include <variant>

#include "kernels/cpu/winograd_conv.h"

namespace ndserve::kernels::cpu {

int PackableWeightInput(OpKind op, const OpAttrs& attrs) {
  switch (op) {
    case OpKind::kConv: {
      // Depthwise and grouped convs keep their own paths (depthwise_conv.h, per-group
      // GEMMs); ConvTranspose multiplies by W^T and scatters, a different product.
      const ConvAttrs* a = std::get_if<ConvAttrs>(&attrs);
      return a != nullptr && a->group == 1 ? 1 : -1;
    }
    case OpKind::kGemm: {
      // alpha scales the product; nn.Linear exports alpha 1, the only case packed.
      const GemmAttrs* a = std::get_if<GemmAttrs>(&attrs);
      return a != nullptr && a->alpha == 1.0f ? 1 : -1;
    }
    case OpKind::kMatMul:
      return 1;
    default:
      return -1;
  }
}

std::unique_ptr<PackedMatrix> PackNodeWeight(OpKind op, const OpAttrs& attrs,
                                             const TensorView& weight) {
  if (PackableWeightInput(op, attrs) < 0 || weight.dtype != DType::kFp32 ||
      weight.data == nullptr || weight.numel() == 0) {
    return nullptr;
  }
  const float* w = static_cast<const float*>(weight.data);
  const ShapeSpan s = weight.shape;
  if (op == OpKind::kConv) {
    if (s.size() < 3) return nullptr;
    const int64_t m = s[0], k = weight.numel() / m;
    auto packed = std::make_unique<PackedMatrix>(
        PackedMatrix::Pack(PackedMatrix::Side::kA, MatrixRef{w, k, false}, m, k));
    if (s.size() == 4 && WinogradWeightSuits(std::get<ConvAttrs>(attrs), m, s[1], s[2], s[3])) {
      packed->set_winograd(PackWinogradWeight(w, m, s[1]));
    }
    return packed;
  }
  if (s.size() != 2) return nullptr;
  const bool trans = op == OpKind::kGemm && std::get<GemmAttrs>(attrs).trans_b;
  const int64_t k = trans ? s[1] : s[0], n = trans ? s[0] : s[1];
  return std::make_unique<PackedMatrix>(
      PackedMatrix::Pack(PackedMatrix::Side::kB, MatrixRef{w, s[1], trans}, k, n));
}

}  // namespace ndserve::kernels::cpu
