#ifndef NDSERVE_ENGINE_HALF_PRECISION_H_
#define NDSERVE_ENGINE_HALF_PRECISION_H_

// FP16 and BF16 models (a `model.half()` export, or an FP32 export converted to FP16)
// computed in FP32 (docs/design.md §4.6). The kernels are written for FP32; rather than a
// second set for 16-bit floats, the loader rewrites the graph so that everything between
// the graph's inputs and outputs is FP32, and the model's signature stays as the file
// states it (clients send and receive FP16/BF16):
//  - 16-bit float initializers (exporters' Constants included) become FP32 copies;
//  - each 16-bit float graph input feeds a Cast to FP32 that its readers read instead;
//  - each 16-bit float graph output is produced under a new name and a Cast back to its
//    type gives the output;
//  - Cast nodes to FP16/BF16 cast to FP32 instead, and 16-bit float TENSOR attributes
//    (ConstantOfShape's value) and `dtype` attributes say FP32.
// Accuracy is FP32 arithmetic on the 16-bit weights and inputs, rounded once at the
// outputs: at least as close to an FP32 reference as a native FP16 run.

#include "absl/status/statusor.h"
#include "engine/graph.h"

namespace ndserve::engine {

// Rewrites `def` as above; returns how many initializers, inputs, outputs and attributes
// it changed (0: the graph has no 16-bit floats and is untouched). INVALID_ARGUMENT for an
// initializer whose bytes are not a whole number of elements.
absl::StatusOr<int> ComputeHalfPrecisionInFp32(GraphDef* def);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_HALF_PRECISION_H_
