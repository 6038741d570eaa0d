#include "loadtest/tensor_spec.h"

#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "protocol/datatype.h"
#include "protocol/dims.h"

namespace ndserve::loadtest {
namespace {

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // The wire and every supported host are little-endian.
  out->append(bytes, sizeof(T));
}

// Round-to-nearest-even is not worth it for random data; truncation keeps the values
// finite and inside [-1, 1), which is all a load test needs.
std::uint16_t FloatToHalf(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + 15;
  if (exponent <= 0) return sign;  // Too small for a normal half: zero.
  if (exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7bffu);
  return static_cast<std::uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ffu));
}

}  // namespace

std::int64_t ElementCount(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string FormatShape(const std::vector<std::int64_t>& shape) {
  return protocol::FormatDims(shape);
}

absl::StatusOr<TensorSpec> ParseTensorSpec(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 3 || parts[0].empty() || parts[2].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", text, "': expected NAME:DATATYPE:DIMS, e.g. input:FP32:-1x64"));
  }
  TensorSpec spec{std::string(parts[0]), std::string(parts[1]), {}};
  if (protocol::ElementSize(spec.datatype) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", text, "': unknown datatype '", spec.datatype, "'"));
  }
  absl::StatusOr<std::vector<std::int64_t>> dims =
      protocol::ParseDims(parts[2], {.allow_wildcard = true, .allow_zero = false});
  if (!dims.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", text, "': ", dims.status().message()));
  }
  spec.shape = *std::move(dims);
  return spec;
}

absl::StatusOr<TensorSpec> ResolveShape(const TensorSpec& spec, std::int64_t batch,
                                        std::int64_t variable_dim) {
  TensorSpec out = spec;
  for (size_t i = 0; i < out.shape.size(); ++i) {
    if (out.shape[i] == -1) out.shape[i] = i == 0 ? batch : variable_dim;
    if (out.shape[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': shape ",
                                                     FormatShape(spec.shape),
                                                     " has a dimension that cannot be sent"));
    }
  }
  return out;
}

absl::StatusOr<std::string> RandomTensorBytes(const TensorSpec& spec, const RandomOptions& options,
                                              std::mt19937_64& rng) {
  const std::string& t = spec.datatype;
  const int size = protocol::ElementSize(t);
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat("unknown datatype ", t));
  const std::int64_t n = ElementCount(spec.shape);
  std::string out;
  out.reserve(static_cast<size_t>(n) *
              static_cast<size_t>(size == 0 ? 4 + options.bytes_length : size));
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<std::int64_t> integer(
      0, std::max<std::int64_t>(1, options.int_max) - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    if (t == "FP32") {
      Put(&out, real(rng));
    } else if (t == "FP64") {
      Put(&out, static_cast<double>(real(rng)));
    } else if (t == "FP16") {
      Put(&out, FloatToHalf(real(rng)));
    } else if (t == "BF16") {
      Put(&out, static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(real(rng)) >> 16));
    } else if (t == "BOOL") {
      Put(&out, static_cast<std::uint8_t>(rng() & 1));
    } else if (t == "BYTES") {
      Put(&out, static_cast<std::uint32_t>(options.bytes_length));
      for (int k = 0; k < options.bytes_length; ++k)
        out.push_back(static_cast<char>('a' + rng() % 26));
    } else {
      // Integers: the low `size` bytes of a value in range, which is the value itself for
      // every integer type wide enough to hold int_max.
      const std::int64_t v = integer(rng);
      char bytes[8];
      std::memcpy(bytes, &v, 8);
      out.append(bytes, static_cast<size_t>(size));
    }
  }
  return out;
}

}  // namespace ndserve::loadtest
