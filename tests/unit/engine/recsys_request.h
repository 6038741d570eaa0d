#ifndef NDSERVE_TESTS_UNIT_ENGINE_RECSYS_REQUEST_H_
#define NDSERVE_TESTS_UNIT_ENGINE_RECSYS_REQUEST_H_

// One batch-1 request for the recsys example (tools/gen_models.py): sparse_ids [1, 4, 8]
// drawn below the tables' row count and dense [1, 13] in [-1, 1), both from `seed`. The
// request's inputs view `ids` and `dense`, so a test may edit them between Infer calls (an
// out-of-range id, say); the object is neither copied nor moved for the same reason.

#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/inference_request.h"
#include "memory/dtype.h"

namespace ndserve::engine::testing {

struct RecsysRequest {
  static constexpr int64_t kFeatures = 4, kBag = 8, kDense = 13;
  static constexpr int64_t kTableRows = 100000;  // tools/gen_models.py RECSYS_ROWS

  explicit RecsysRequest(uint64_t seed) : ids(kFeatures * kBag), dense(kDense) {
    std::mt19937_64 rng(seed);
    for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kTableRows);
    for (float& x : dense) x = static_cast<float>(rng() % 1000) / 500.0f - 1.0f;
    request.model_name = "recsys";
    request.id = absl::StrCat("recsys-", seed);
    request.inputs.push_back({"sparse_ids", DType::kInt64, {1, kFeatures, kBag}, Bytes(ids)});
    request.inputs.push_back({"dense", DType::kFp32, {1, kDense}, Bytes(dense)});
  }
  RecsysRequest(const RecsysRequest&) = delete;
  RecsysRequest& operator=(const RecsysRequest&) = delete;

  // ids[feature][slot] of the one row.
  int64_t& id(int64_t feature, int64_t slot) { return ids[feature * kBag + slot]; }

  std::vector<int64_t> ids;
  std::vector<float> dense;
  InferenceRequest request;

 private:
  template <typename T>
  static absl::Span<const uint8_t> Bytes(const std::vector<T>& v) {
    return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
  }
};

}  // namespace ndserve::engine::testing

#endif  // NDSERVE_TESTS_UNIT_ENGINE_RECSYS_REQUEST_H_
