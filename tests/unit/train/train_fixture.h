#ifndef NDSERVE_TESTS_UNIT_TRAIN_TRAIN_FIXTURE_H_
#define NDSERVE_TESTS_UNIT_TRAIN_TRAIN_FIXTURE_H_

// Reads one run of tools/gen_train_fixtures.py (PyTorch's batches, losses and weights):
// manifest.txt holds "name kind dims..." per tensor ("f32" or "i64"), its bytes are in
// name.bin.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/host_tensor.h"
#include "gtest/gtest.h"
#include "train/training_run.h"

namespace ndserve::train::testing_util {

struct FixtureTensor {
  bool is_int = false;  // INT64, else FP32
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> bytes;
};

// Where the build put the fixtures, unless NDSERVE_TRAIN_FIXTURES names another folder
// (a GPU machine runs the bundled binary far from the build tree: scripts/gpu-run.sh).
inline std::string TrainFixturesDir() {
  const char* env = std::getenv("NDSERVE_TRAIN_FIXTURES");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(NDSERVE_TRAIN_FIXTURES);
}

inline std::map<std::string, FixtureTensor> ReadTrainFixture(const std::string& folder) {
  std::map<std::string, FixtureTensor> out;
  std::ifstream manifest(folder + "/manifest.txt");
  EXPECT_TRUE(manifest.good()) << folder;
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    std::string name, kind;
    in >> name >> kind;
    FixtureTensor t;
    t.is_int = kind == "i64";
    for (std::int64_t d; in >> d;) t.dims.push_back(d);
    std::ifstream bin(folder + "/" + name + ".bin", std::ios::binary);
    t.bytes.assign(std::istreambuf_iterator<char>(bin), std::istreambuf_iterator<char>());
    out[name] = std::move(t);
  }
  return out;
}

// The session settings of the recurrent run ("recurrent_sgd": an ONNX LSTM, MSE on its
// per-step head, SGD lr 0.1, two time steps per batch with the state carried).
inline TrainingRunOptions RecurrentSgdOptions() {
  TrainingRunOptions options;
  options.loss = LossKind::kMse;
  options.target_output = "pred";
  options.optimizer = OptimizerKind::kSgd;
  options.lr = 0.1f;
  options.truncated_bptt_steps = 2;
  return options;
}

// Batch k of the recurrent run: X as input "x"; the head runs on every time step,
// t-major, so the labels "y" are [T*B, 1].
inline std::pair<std::vector<engine::HostTensor>, engine::HostTensor> RecurrentBatch(
    const std::map<std::string, FixtureTensor>& data, int k) {
  const FixtureTensor& x = data.at("batch" + std::to_string(k) + ".x");
  const FixtureTensor& y = data.at("batch" + std::to_string(k) + ".y");
  return {{{"x", DType::kFp32, x.dims, x.bytes}},
          engine::HostTensor{"y", DType::kFp32, {x.dims[0] * x.dims[1], 1}, y.bytes}};
}

}  // namespace ndserve::train::testing_util

#endif  // NDSERVE_TESTS_UNIT_TRAIN_TRAIN_FIXTURE_H_
