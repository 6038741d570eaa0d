#ifndef NDSERVE_TESTS_FIXTURE_CASE_H_
#define NDSERVE_TESTS_FIXTURE_CASE_H_

// The fixture manifest (case.txt) that tools/gen_models.py writes next to every op and
// model fixture under tests/fixtures, read one way for every test binary. The grammar is
// in each case.txt's own header:
//   model <path> | op <OpType> | opset <N> | attr <name> int|float|ints|floats|string <v> |
//   attr <name> tensor <DTYPE> <dims> <v,...> |
//   input|const|output <name> <DTYPE> <dims> <file> | tolerance <atol> <rtol> |
//   output_tolerance <name> <atol> <rtol>   (one output's own bound; PyTorch fixtures)

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/dtype.h"

namespace ndserve::fixtures {

// The repository root: $NDSERVE_SOURCE_DIR (ctest sets it), else the nearest ancestor of
// the test binary or of the working directory that holds tests/fixtures.
std::filesystem::path SourceDir();

// One input, const or output line with its file's bytes (checked against dtype x dims).
struct FixtureTensor {
  std::string kind;  // "input" (graph input), "const" (initializer) or "output"
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;

  std::int64_t numel() const;
};

// A TENSOR attribute (ConstantOfShape's value): integer and BOOL elements in `ints`,
// floating ones in `reals`.
struct FixtureTensorAttr {
  DType dtype = DType::kFp32;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> ints;
  std::vector<double> reals;
};

// An ONNX node attribute as case.txt states it.
using FixtureAttr = std::variant<std::int64_t, float, std::vector<std::int64_t>,
                                 std::vector<float>, std::string, FixtureTensorAttr>;

// Pass if |got - want| <= atol + rtol * |want|.
struct FixtureTolerance {
  double atol = 0;
  double rtol = 0;
};

// One fixture directory. Plain value.
struct FixtureCase {
  std::string name;  // the directory's name
  std::filesystem::path dir;
  std::filesystem::path model;  // dir / the model line's path
  std::string op;               // op cases only
  int opset = 0;                // op cases only
  std::vector<std::pair<std::string, FixtureAttr>> attrs;
  std::vector<FixtureTensor> inputs;  // input and const lines, in the node's input order
  std::vector<FixtureTensor> outputs;
  double atol = 0, rtol = 0;  // the tolerance line: every output's bound
  // output_tolerance lines by output name (outputs without one use atol/rtol).
  std::map<std::string, FixtureTolerance> output_tolerances;

  // The "input" lines only: what a request feeds.
  std::vector<const FixtureTensor*> GraphInputs() const;
};

// "[2,3]" -> {2, 3}; "[]" -> {} (a scalar). INVALID_ARGUMENT otherwise.
absl::StatusOr<std::vector<std::int64_t>> ParseFixtureDims(absl::string_view text);

// Reads dir/case.txt and the tensor files it names. NOT_FOUND for a missing file;
// INVALID_ARGUMENT naming the line for anything the grammar does not allow, and for a
// tensor file whose size differs from its dtype and dims.
absl::StatusOr<FixtureCase> ReadFixtureCase(const std::filesystem::path& dir);

// The names of the subdirectories of `root` that hold a case.txt, sorted.
std::vector<std::string> FixtureCaseNames(const std::filesystem::path& root);

}  // namespace ndserve::fixtures

#endif  // NDSERVE_TESTS_FIXTURE_CASE_H_
