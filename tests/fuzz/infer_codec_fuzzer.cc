// libFuzzer target: bytes -> ModelInferRequest (protobuf wire format) -> the server's
// request decoding, then the response encoding of an echo of the decoded inputs.
// Whatever the bytes, decoding must return a Status (never crash, never allocate from a
// claimed shape), and a request it accepts must hold exactly the bytes its shapes say.
//
// Build (clang only): cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang
//   -DCMAKE_CXX_COMPILER=clang++ -DNDSERVE_BUILD_FUZZERS=ON -DNDSERVE_BUILD_BENCHMARKS=OFF
//   && ninja -C build-fuzz infer_codec_fuzzer
// Run: mkdir -p /tmp/corpus && build-fuzz/tests/fuzz/infer_codec_fuzzer /tmp/corpus
//   tests/fuzz/corpus/infer_codec -max_total_time=120
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "server/infer_codec.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<ndserve::DecodedInferRequest> decoded = ndserve::DecodeInferRequest(wire);
  if (!decoded.ok()) {
    Check(decoded.status().code() == absl::StatusCode::kInvalidArgument, "error is not INVALID");
    Check(!decoded.status().message().empty(), "error without a message");
    return 0;
  }
  const ndserve::engine::InferenceRequest& request = decoded->request();
  Check(request.inputs.size() == static_cast<size_t>(wire.inputs_size()), "input count");
  ndserve::engine::InferenceResponse echo;
  echo.model_name = request.model_name;
  echo.id = request.id;
  uint64_t checksum = 0;
  for (const ndserve::engine::InferInputTensor& in : request.inputs) {
    uint64_t elements = 1;
    for (int64_t d : in.shape) {
      Check(d >= 0, "negative dimension accepted");
      Check(!__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements),
            "overflowing shape accepted");
    }
    if (ndserve::DTypeIsFixedSize(in.dtype)) {
      Check(in.data.size() == elements * ndserve::DTypeSize(in.dtype), "byte size");
    } else {
      Check(ndserve::ValidateBytesTensor(
                absl::string_view(reinterpret_cast<const char*>(in.data.data()), in.data.size()),
                static_cast<int64_t>(elements), "fuzz")
                .ok(),
            "BYTES tensor");
    }
    // Touch every byte of the view (ASan checks it is inside live memory).
    for (uint8_t b : in.data) checksum += b;
    ndserve::engine::InferOutputTensor& out = echo.outputs.emplace_back();
    out.name = in.name;
    out.dtype = in.dtype;
    out.shape = in.shape;
    out.data.assign(in.data.begin(), in.data.end());
  }
  inference::ModelInferResponse response;
  ndserve::EncodeInferResponse(echo, &response);
  Check(response.raw_output_contents_size() == static_cast<int>(echo.outputs.size()),
        "encoded output count");
  return checksum == 0xdeadbeefdeadbeefULL ? 1 : 0;
}
