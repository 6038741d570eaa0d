#ifndef NDSERVE_ENGINE_INFERENCE_REQUEST_H_
#define NDSERVE_ENGINE_INFERENCE_REQUEST_H_

// What the inference service hands the engine and gets back. Plain values, no protobuf:
// the server decodes ModelInferRequest into these (views over the request's bytes, no
// copy) and encodes the response from them.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "memory/dtype.h"

namespace ndserve::engine {

// One input tensor. `data` views host bytes (little-endian, C order, exactly
// numel * DTypeSize bytes) that the caller keeps alive until Infer returns; the engine
// copies them into the request's PredictorContext and never keeps the view.
struct InferInputTensor {
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> data;
};

struct InferenceRequest {
  std::string model_name;
  int64_t model_version = 0;  // <= 0: the highest loaded version
  std::string id;             // echoed in the response
  std::vector<InferInputTensor> inputs;
  // Names of the outputs to return, in this order; empty: every model output in the
  // model's order.
  std::vector<std::string> requested_outputs;
  // When the client stops waiting (its gRPC deadline): a request still queued then never
  // runs and fails with DEADLINE_EXCEEDED.
  absl::Time deadline = absl::InfiniteFuture();
  // The request's own queue timeout (Triton's "timeout" parameter), in microseconds; 0:
  // none. Honoured only where the model's queue policy has allow_timeout_override.
  uint64_t timeout_microseconds = 0;
  // Triton's "priority" parameter: the priority level (1 first) where the model's
  // dynamic_batching has priority_levels; 0: the model's default level.
  uint64_t priority = 0;
  // When set, the engine reads it before every graph node and, once true, stops the
  // request there with CANCELLED: a shutdown's exit timeout cuts requests still computing
  // instead of waiting for them. Not owned; must outlive Infer.
  const std::atomic<bool>* cancel = nullptr;
};

// One output tensor; owns its bytes (copied out of device memory before the request's
// context closed).
struct InferOutputTensor {
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Where one request spent its time, and the most memory its context held at once.
struct InferenceTimings {
  int64_t queue_ns = 0;           // waiting for a free predictor
  int64_t compute_input_ns = 0;   // validating and uploading inputs
  int64_t compute_infer_ns = 0;   // running the graph
  int64_t compute_output_ns = 0;  // copying outputs out
  uint64_t context_peak_bytes = 0;
  uint64_t context_output_bytes = 0;  // every node output's bytes, summed (no liveness)
};

struct InferenceResponse {
  std::string model_name;
  int64_t model_version = 0;  // the version that ran
  std::string id;
  std::vector<InferOutputTensor> outputs;
  InferenceTimings timings;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_INFERENCE_REQUEST_H_
