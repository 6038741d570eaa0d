// The ONNX writer: a model file with some initializers given new values, the rest of the
// model kept, and a refusal for every value that does not fit.
#include "engine/onnx_writer.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/onnx_loader.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;
using testing::TempDir;

std::string MlpFile() { return (SourceDir() / "examples/models/mlp/1/model.onnx").string(); }

HostTensor Fp32(const std::string& name, std::vector<std::int64_t> shape, float value) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::vector<float> v(n, value);
  HostTensor t{name, DType::kFp32, std::move(shape), {}};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

const Initializer* FindInit(const GraphDef& def, const std::string& name) {
  for (const Initializer& i : def.initializers) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

TEST(OnnxWriterTest, ReplacesTheNamedInitializersAndKeepsTheRest) {
  TempDir dir;
  const std::string out = (dir.path() / "model.onnx").string();
  const HostTensor bias = Fp32("fc2.bias", {10}, 0.25f);
  const HostTensor weight = Fp32("fc0.weight", {128, 64}, -1.5f);
  ASSERT_TRUE(WriteOnnxWithInitializers(MlpFile(), {bias, weight}, out).ok());

  absl::StatusOr<GraphDef> before = ReadOnnxGraphDef(MlpFile());
  absl::StatusOr<GraphDef> after = ReadOnnxGraphDef(out);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->initializers.size(), before->initializers.size());
  ASSERT_EQ(after->nodes.size(), before->nodes.size());
  EXPECT_EQ(after->opset, before->opset);
  for (const Initializer& b : before->initializers) {
    const Initializer* a = FindInit(*after, b.name);
    ASSERT_NE(a, nullptr) << b.name;
    EXPECT_EQ(a->shape, b.shape) << b.name;
    EXPECT_EQ(a->dtype, b.dtype) << b.name;
    if (b.name == "fc2.bias") {
      EXPECT_EQ(a->bytes, std::string(bias.bytes.begin(), bias.bytes.end()));
    } else if (b.name == "fc0.weight") {
      EXPECT_EQ(a->bytes, std::string(weight.bytes.begin(), weight.bytes.end()));
    } else {
      EXPECT_EQ(a->bytes, b.bytes) << b.name;
    }
  }
  // The written model loads and builds like the original.
  EXPECT_TRUE(LoadOnnxGraph(out).ok());
  // Nothing but the model file is left in the directory (the temporary was renamed).
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(OnnxWriterTest, RefusesValuesThatDoNotFit) {
  TempDir dir;
  const std::string out = (dir.path() / "model.onnx").string();
  auto write = [&](std::vector<HostTensor> values) {
    return WriteOnnxWithInitializers(MlpFile(), values, out);
  };
  absl::Status unknown = write({Fp32("fc9.bias", {10}, 0)});
  EXPECT_TRUE(absl::IsInvalidArgument(unknown));
  EXPECT_NE(unknown.message().find("'fc9.bias'"), std::string::npos) << unknown;

  absl::Status shape = write({Fp32("fc2.bias", {11}, 0)});
  EXPECT_TRUE(absl::IsInvalidArgument(shape));
  EXPECT_NE(shape.message().find("shape"), std::string::npos) << shape;

  HostTensor as_double = Fp32("fc2.bias", {5}, 0);
  as_double.dtype = DType::kFp64;
  absl::Status dtype = write({as_double});
  EXPECT_TRUE(absl::IsInvalidArgument(dtype));
  EXPECT_NE(dtype.message().find("FP64"), std::string::npos) << dtype;

  HostTensor short_bytes = Fp32("fc2.bias", {10}, 0);
  short_bytes.bytes.pop_back();
  EXPECT_TRUE(absl::IsInvalidArgument(write({short_bytes})));

  EXPECT_TRUE(
      absl::IsInvalidArgument(write({Fp32("fc2.bias", {10}, 0), Fp32("fc2.bias", {10}, 1)})));
  EXPECT_TRUE(
      absl::IsNotFound(WriteOnnxWithInitializers((dir.path() / "missing.onnx").string(), {}, out)));
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ndserve::engine
