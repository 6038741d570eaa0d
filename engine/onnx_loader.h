#ifndef NDSERVE_ENGINE_ONNX_LOADER_H_
#define NDSERVE_ENGINE_ONNX_LOADER_H_

// Reading ONNX files (onnx::ModelProto, Debian's libonnx) into the engine's graph IR.
// The protobuf types stay inside onnx_loader.cc.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/graph.h"

namespace ndserve::engine {

// Parses `path` into a GraphDef. Constant nodes (default domain) become initializers
// named after their output, for every value attribute (value, value_float(s),
// value_int(s)); sparse_value and value_string(s) are UNIMPLEMENTED naming the node.
// Errors name the file and say what is wrong:
// NOT_FOUND for a missing file; INVALID_ARGUMENT for an empty, truncated or non-ONNX
// file, a non-tensor input, or an initializer whose data does not match its shape;
// UNIMPLEMENTED for a default-domain opset outside 13..17, external or sparse
// initializers, or STRING / complex initializers. Thread-safe.
absl::StatusOr<GraphDef> ReadOnnxGraphDef(const std::string& path);

// The same from bytes in memory; `what` names them in errors.
absl::StatusOr<GraphDef> ParseOnnxGraphDef(absl::string_view bytes, absl::string_view what);

// ReadOnnxGraphDef + Graph::Build; every error is prefixed with the path.
absl::StatusOr<Graph> LoadOnnxGraph(const std::string& path);

// ParseOnnxGraphDef + Graph::Build on bytes in memory (the loader fuzzer, tests); every
// error is prefixed with `what`.
absl::StatusOr<Graph> LoadOnnxGraphFromBytes(absl::string_view bytes, absl::string_view what);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_ONNX_LOADER_H_
