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

#include "gtest/gtest.h"

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

}  // namespace ndserve::train::testing_util

#endif  // NDSERVE_TESTS_UNIT_TRAIN_TRAIN_FIXTURE_H_
