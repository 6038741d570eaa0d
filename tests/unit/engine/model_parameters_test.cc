// The model parameters ndserve reads from config.pbtxt's free-form `parameters` map:
// `cuda_graphs`, `tf32`, `cublaslt` and `pad_batches` (docs/design.md §4.3).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;

std::string CudaGraphs(const std::string& value) {
  return "parameters { key: \"cuda_graphs\" value: { string_value: \"" + value + "\" } }";
}

TEST(ModelParametersTest, CudaGraphsIsOnByDefaultAndSwitchesOff) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("max_batch_size: 4", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cuda_graphs);
  c = ParseModelConfig(CudaGraphs("false"), "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->cuda_graphs);
  c = ParseModelConfig(CudaGraphs("TRUE"), "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cuda_graphs);
}

TEST(ModelParametersTest, OtherParametersAreIgnored) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(
      "parameters { key: \"execution_mode\" value: { string_value: \"parallel\" } }", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cuda_graphs);
}

TEST(ModelParametersTest, CudaGraphsThatIsNotASwitchIsRefused) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(CudaGraphs("off"), "models/m/config.pbtxt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("models/m/config.pbtxt: parameter 'cuda_graphs' must be \"true\" or "
                        "\"false\", not \"off\""));
}

TEST(ModelParametersTest, CudaGraphsOffSurvivesTheRoundTrip) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(CudaGraphs("false"), "m");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = ModelConfigToText(*c);
  EXPECT_THAT(text, HasSubstr("cuda_graphs"));
  absl::StatusOr<ModelConfig> again = ParseModelConfig(text, "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cuda_graphs);
  // On, the default, prints nothing: configs without the parameter print as before.
  EXPECT_THAT(ModelConfigToText(ModelConfig{}), ::testing::Not(HasSubstr("cuda_graphs")));
}

std::string Tf32(const std::string& value) {
  return "parameters { key: \"tf32\" value: { string_value: \"" + value + "\" } }";
}

TEST(ModelParametersTest, Tf32IsOffByDefaultAndSwitchesOn) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("max_batch_size: 4", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tf32);
  c = ParseModelConfig(Tf32("True"), "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tf32);
  EXPECT_TRUE(c->cuda_graphs) << "one parameter leaves the other alone";
  c = ParseModelConfig(Tf32("yes"), "models/m/config.pbtxt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("parameter 'tf32' must be \"true\" or \"false\", not \"yes\""));
}

TEST(ModelParametersTest, Tf32OnSurvivesTheRoundTrip) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(Tf32("true") + "\n" + CudaGraphs("false"), "m");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToText(*c), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->tf32);
  EXPECT_FALSE(again->cuda_graphs);
  EXPECT_THAT(ModelConfigToText(ModelConfig{}), ::testing::Not(HasSubstr("tf32")));
}

TEST(ModelParametersTest, CublasLtIsOnByDefaultAndOffSurvivesTheRoundTrip) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("max_batch_size: 4", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->cublaslt);
  c = ParseModelConfig("parameters { key: \"cublaslt\" value: { string_value: \"false\" } }",
                       "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->cublaslt);
  EXPECT_FALSE(c->tf32) << "one parameter leaves the others alone";
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToText(*c), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cublaslt);
  EXPECT_THAT(ModelConfigToText(ModelConfig{}), ::testing::Not(HasSubstr("cublaslt")));
  c = ParseModelConfig("parameters { key: \"cublaslt\" value: { string_value: \"no\" } }",
                       "models/m/config.pbtxt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("parameter 'cublaslt' must be \"true\" or \"false\", not \"no\""));
}

TEST(ModelParametersTest, PadBatchesIsUnsetUnlessGivenAndSurvivesTheRoundTrip) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("max_batch_size: 4", "m");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->pad_batches.has_value()) << "unset: the device decides";
  for (const bool on : {true, false}) {
    c = ParseModelConfig(absl::StrCat("parameters { key: \"pad_batches\" value: { string_value: \"",
                                      on ? "true" : "FALSE", "\" } }"),
                         "m");
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(c->pad_batches.has_value());
    EXPECT_EQ(*c->pad_batches, on);
    absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToText(*c), "round trip");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->pad_batches, std::optional<bool>(on));
  }
  c = ParseModelConfig("parameters { key: \"pad_batches\" value: { string_value: \"4\" } }",
                       "models/m/config.pbtxt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("parameter 'pad_batches' must be"));
  EXPECT_THAT(ModelConfigToText(ModelConfig{}), ::testing::Not(HasSubstr("pad_batches")));
}

}  // namespace
}  // namespace ndserve::engine
