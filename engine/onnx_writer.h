#ifndef NDSERVE_ENGINE_ONNX_WRITER_H_
#define NDSERVE_ENGINE_ONNX_WRITER_H_

// Writing ONNX files: a served model's graph with new parameter values, the file a
// published version is loaded from (Engine::PublishVersion). The protobuf types stay in
// onnx_writer.cc.

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/host_tensor.h"

namespace ndserve::engine {

// Reads the ONNX model `source_path` (the file a model version was loaded from), gives
// each initializer named in `values` its new value, and writes the result to
// `dest_path`: through a temporary file in the same directory renamed over it, so a
// reader of the repository never sees half a file. Everything else (graph, opsets,
// metadata, the other initializers) is kept as it was. A name may be a graph
// initializer or a Constant node's output with a `value` tensor (the loader treats both
// as initializers). INVALID_ARGUMENT naming the tensor for an unknown name, a name
// given twice, a dtype or shape other than the initializer's, or bytes that do not
// match them; NOT_FOUND / INVALID_ARGUMENT for a missing or unreadable source (as
// ReadOnnxGraphDef); INTERNAL for a failed write (with errno's text). Thread-safe.
absl::Status WriteOnnxWithInitializers(const std::string& source_path,
                                       absl::Span<const HostTensor> values,
                                       const std::string& dest_path);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_ONNX_WRITER_H_
