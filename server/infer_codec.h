#ifndef NDSERVE_SERVER_INFER_CODEC_H_
#define NDSERVE_SERVER_INFER_CODEC_H_

// KServe v2 ModelInferRequest / ModelInferResponse <-> the engine's plain request and
// response types. Pure functions: no server, no engine, no global state, so they are unit
// tested and fuzzed on their own (tests/unit/server/infer_codec_test.cc,
// tests/fuzz/infer_codec_fuzzer.cc).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/inference_request.h"
#include "memory/dtype.h"
#include "proto/inference.pb.h"

namespace ndserve {

// A ModelInferRequest decoded for Engine::Infer.
//
// Raw inputs (raw_input_contents) are views into the ModelInferRequest's strings: no
// copy, so the ModelInferRequest must outlive this object and stay unmodified. Typed
// inputs (`contents`) are converted into little-endian buffers that this object owns.
// Movable (moving keeps every view valid: the buffers live on the heap); not copyable.
// Not thread-safe; a plain value.
class DecodedInferRequest {
 public:
  DecodedInferRequest() = default;
  DecodedInferRequest(DecodedInferRequest&&) = default;
  DecodedInferRequest& operator=(DecodedInferRequest&&) = default;
  DecodedInferRequest(const DecodedInferRequest&) = delete;
  DecodedInferRequest& operator=(const DecodedInferRequest&) = delete;

  const engine::InferenceRequest& request() const { return request_; }
  engine::InferenceRequest& mutable_request() { return request_; }

  // Bytes copied out of typed contents (0 when every input was raw).
  size_t owned_bytes() const;

 private:
  friend absl::StatusOr<DecodedInferRequest> DecodeInferRequest(
      const inference::ModelInferRequest& wire);

  engine::InferenceRequest request_;
  // One buffer per typed input; unique_ptr so that a buffer never moves.
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
};

// "" -> 0 (the highest loaded version), "3" -> 3. INVALID_ARGUMENT for anything that is
// not a non-negative decimal number, naming `text`.
absl::StatusOr<int64_t> ParseModelVersion(absl::string_view text);

// Elements of `shape`: INVALID_ARGUMENT for a negative dimension or when the product
// does not fit in int64 (a huge dimension: never allocate from it). `what` names the
// tensor in messages ("input 'x'").
absl::StatusOr<int64_t> CheckedElementCount(absl::Span<const int64_t> shape,
                                            absl::string_view what);

// Checks that `data` is exactly `elements` BYTES elements, each a 4-byte little-endian
// length followed by that many bytes, ending exactly at the end of `data`.
absl::Status ValidateBytesTensor(absl::string_view data, int64_t elements, absl::string_view what);

// ModelInferRequest -> engine request. Every error is INVALID_ARGUMENT and names the tensor
// where there is one: a model name, request id, input or requested output name longer
// than kMaxNameBytes or not UTF-8 (base/text.h; checked before anything else), no inputs, an
// unknown datatype, a negative or huge dimension, raw contents whose count differs from the inputs'
// or whose size differs from shape x datatype, typed contents in the wrong field or of the wrong
// count, raw and typed contents together, FP16/BF16 sent typed, out-of-range typed values,
// malformed BYTES. Whether the inputs fit the model is the engine's to say.
absl::StatusOr<DecodedInferRequest> DecodeInferRequest(const inference::ModelInferRequest& wire);

// An upper bound of the bytes EncodeInferResponse's message holds for `response` (tensor
// bytes plus names, shapes and field overhead), so that a response can be refused before
// it is built.
size_t EncodedResponseBytes(const engine::InferenceResponse& response);

// Engine response -> ModelInferResponse: model name and version, the request's id, and
// every output as an InferOutputTensor (name, datatype, shape) plus its bytes in
// raw_output_contents, in the same order. Replaces what `wire` held.
void EncodeInferResponse(const engine::InferenceResponse& response,
                         inference::ModelInferResponse* wire);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_INFER_CODEC_H_
