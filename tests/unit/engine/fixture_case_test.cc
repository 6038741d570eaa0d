// tests/fixture_case.h: the case.txt reader every fixture test shares.
#include "tests/fixture_case.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::fixtures {
namespace {

namespace fs = std::filesystem;
using engine::testing::TempDir;
using engine::testing::WriteFile;

std::string Floats(std::vector<float> v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(FixtureCaseTest, ReadsEveryDirective) {
  TempDir dir;
  WriteFile(dir.path() / "in_x.bin", Floats({1, 2, 3, 4, 5, 6}));
  WriteFile(dir.path() / "in_shape.bin", std::string(16, '\0'));
  WriteFile(dir.path() / "out_y.bin", Floats({1, 2, 3, 4, 5, 6}));
  WriteFile(dir.path() / "case.txt",
            "# a comment\n"
            "model model.onnx\n"
            "op Reshape\n"
            "opset 14\n"
            "attr allowzero int 0\n"
            "attr scale float 0.5\n"
            "attr perm ints 1,0\n"
            "attr weights floats 0.25,-1\n"
            "input x FP32 [2,3] in_x.bin\n"
            "const shape INT64 [2] in_shape.bin\n"
            "output y FP32 [3,2] out_y.bin\n"
            "tolerance 1e-05 0.0001\n"
            "output_tolerance y 0.5 0.25\n");
  absl::StatusOr<FixtureCase> c = ReadFixtureCase(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, dir.path() / "model.onnx");
  EXPECT_EQ(c->op, "Reshape");
  EXPECT_EQ(c->opset, 14);
  ASSERT_EQ(c->attrs.size(), 4u);
  EXPECT_EQ(std::get<std::int64_t>(c->attrs[0].second), 0);
  EXPECT_EQ(std::get<float>(c->attrs[1].second), 0.5f);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(c->attrs[2].second),
            (std::vector<std::int64_t>{1, 0}));
  EXPECT_EQ(std::get<std::vector<float>>(c->attrs[3].second), (std::vector<float>{0.25f, -1}));
  ASSERT_EQ(c->inputs.size(), 2u);  // node input order, const included
  EXPECT_EQ(c->inputs[0].kind, "input");
  EXPECT_EQ(c->inputs[0].dims, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(c->inputs[1].kind, "const");
  EXPECT_EQ(c->inputs[1].dtype, DType::kInt64);
  ASSERT_EQ(c->GraphInputs().size(), 1u);
  EXPECT_EQ(c->GraphInputs()[0]->name, "x");
  ASSERT_EQ(c->outputs.size(), 1u);
  EXPECT_EQ(c->outputs[0].bytes.size(), 24u);
  EXPECT_EQ(c->atol, 1e-5);
  EXPECT_EQ(c->rtol, 1e-4);
  ASSERT_EQ(c->output_tolerances.count("y"), 1u);
  EXPECT_EQ(c->output_tolerances["y"].atol, 0.5);
  EXPECT_EQ(c->output_tolerances["y"].rtol, 0.25);
}

TEST(FixtureCaseTest, ErrorsNameTheLine) {
  TempDir dir;
  WriteFile(dir.path() / "in_x.bin", Floats({1, 2, 3}));
  auto error_for = [&](const std::string& line) {
    WriteFile(dir.path() / "case.txt", "model m.onnx\n" + line + "\n");
    return ReadFixtureCase(dir.path()).status();
  };
  for (const char* bad : {"input x FP32 [2,3] in_x.bin",  // 12 bytes, not 24
                          "input x NOPE [3] in_x.bin", "input x FP32 [3 in_x.bin",
                          "attr a strings x", "attr a int 1.5", "tolerance a b", "frobnicate 1"}) {
    const absl::Status s = error_for(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
    EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  }
  EXPECT_EQ(error_for("input x FP32 [3] missing.bin").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(error_for("input x FP32 [3] in_x.bin").ok());
  EXPECT_EQ(ReadFixtureCase(dir.path() / "nowhere").status().code(), absl::StatusCode::kNotFound);
}

TEST(FixtureCaseTest, Dims) {
  EXPECT_EQ(*ParseFixtureDims("[]"), (std::vector<std::int64_t>{}));
  EXPECT_EQ(*ParseFixtureDims("[0,7,-1]"), (std::vector<std::int64_t>{0, 7, -1}));
  EXPECT_FALSE(ParseFixtureDims("2,3").ok());
  EXPECT_FALSE(ParseFixtureDims("[2,x]").ok());
  EXPECT_FALSE(ParseFixtureDims("[2,,3]").ok());
}

TEST(FixtureCaseTest, CaseNamesAreTheFoldersWithAManifestSorted) {
  TempDir dir;
  WriteFile(dir.path() / "b" / "case.txt", "");
  WriteFile(dir.path() / "a" / "case.txt", "");
  WriteFile(dir.path() / "c" / "notes.txt", "");
  EXPECT_EQ(FixtureCaseNames(dir.path()), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(FixtureCaseNames(dir.path() / "absent").empty());
}

TEST(FixtureCaseTest, FindsTheRepository) {
  EXPECT_TRUE(fs::exists(SourceDir() / "tests/fixtures/ops")) << SourceDir();
}

}  // namespace
}  // namespace ndserve::fixtures
