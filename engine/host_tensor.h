#ifndef NDSERVE_ENGINE_HOST_TENSOR_H_
#define NDSERVE_ENGINE_HOST_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::engine {

// A named tensor in host memory that the engine is handed: one tensor of a training
// batch (BatchIterator), or a parameter's new value (Engine::PublishVersion). A plain
// value.
struct HostTensor {
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // shape x dtype bytes, little-endian
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_HOST_TENSOR_H_
