#ifndef NDSERVE_LOADTEST_TENSOR_SPEC_H_
#define NDSERVE_LOADTEST_TENSOR_SPEC_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve::loadtest {

// One model input as the load generator sends it: a KServe datatype name and a shape in
// which -1 marks a dimension that the batch size (first dimension) or
// `variable_dim` (any other) fills in. Plain value type.
struct TensorSpec {
  std::string name;
  std::string datatype;
  std::vector<std::int64_t> shape;
};

// How random tensor contents are drawn.
struct RandomOptions {
  // Integer inputs are uniform in [0, int_max): ids must stay inside the model's
  // embedding tables, so the default is small.
  std::int64_t int_max = 1000;
  // Length of each BYTES element.
  int bytes_length = 16;
};

// Parses "name:DTYPE:DIMS" where DIMS is 'x'-separated, e.g. "input:FP32:-1x64".
absl::StatusOr<TensorSpec> ParseTensorSpec(absl::string_view text);

// Fills the -1 dimensions: the first with `batch`, any other with `variable_dim`.
absl::StatusOr<TensorSpec> ResolveShape(const TensorSpec& spec, std::int64_t batch,
                                        std::int64_t variable_dim);

std::int64_t ElementCount(const std::vector<std::int64_t>& shape);

// The raw_input_contents bytes of one random tensor of a resolved spec (little-endian,
// row-major; BYTES as 4-byte length prefix + data per element).
absl::StatusOr<std::string> RandomTensorBytes(const TensorSpec& spec, const RandomOptions& options,
                                              std::mt19937_64& rng);

// "[1,64]" (protocol/dims.h).
std::string FormatShape(const std::vector<std::int64_t>& shape);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_TENSOR_SPEC_H_
