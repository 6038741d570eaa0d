#ifndef NDSERVE_KERNELS_CPU_CPU_KERNELS_H_
#define NDSERVE_KERNELS_CPU_CPU_KERNELS_H_

// CPU kernels. Reach them through dispatch.h, which validates every call first; these
// entry points assume validated views (host pointers) and do no checks of their own
// beyond data-dependent ones (Gather indices). Reentrant.

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/kernel_context.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::cpu {

// One declaration per kernel named in ops.def (a kernel shared by several ops is declared
// once per op, which C++ allows), plus NoKernel: the marker an ops.def line names for a
// device the op has no kernel on yet; Lookup reports it as UNIMPLEMENTED at load.
#define NDS_OP(name, since, rules, cpu, cuda, host, flags)                         \
  absl::Status cpu(const KernelContext& ctx, absl::Span<const TensorView> inputs, \
                    absl::Span<const TensorView> outputs, const OpAttrs& attrs);
#include "kernels/ops.def"
#undef NDS_OP
absl::Status NoKernel(const KernelContext& ctx, absl::Span<const TensorView> inputs,
                      absl::Span<const TensorView> outputs, const OpAttrs& attrs);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_CPU_KERNELS_H_
