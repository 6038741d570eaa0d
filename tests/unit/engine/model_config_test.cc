// config.pbtxt parsing (protobuf text format into Triton-numbered ModelConfig).

#include "engine/model_config.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;

TEST(ModelConfigTest, ParsesTheExampleConfigs) {
  absl::StatusOr<ModelConfig> c =
      ReadModelConfig((testing::SourceDir() / "examples/models/recsys/config.pbtxt").string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "recsys");
  EXPECT_EQ(c->platform, "onnxruntime_onnx");
  EXPECT_EQ(c->max_batch_size, 64);
  ASSERT_EQ(c->inputs.size(), 2u);
  EXPECT_EQ(c->inputs[0].ToString(), "sparse_ids INT64[4,8]");
  EXPECT_EQ(c->inputs[1].ToString(), "dense FP32[13]");
  ASSERT_EQ(c->outputs.size(), 1u);
  EXPECT_EQ(c->outputs[0].ToString(), "score FP32[1]");
  ASSERT_EQ(c->instance_groups.size(), 1u);
  EXPECT_EQ(c->instance_groups[0].kind, InstanceGroupConfig::Kind::kAuto);
  EXPECT_EQ(c->InstanceCount(), 1);
  EXPECT_TRUE(c->dynamic_batching.has_value());
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kLatest);
  EXPECT_EQ(c->ModelFilename(), "model.onnx");
}

TEST(ModelConfigTest, TritonFieldsWeDoNotUseAreIgnored) {
  absl::StatusOr<ModelConfig> c =
      ParseModelConfig(R"pb(
                         name: "m"
                         max_batch_size: 8
                         optimization {
                           execution_accelerators {
                             gpu_execution_accelerator:
                             [ { name: "tensorrt" }]
                           }
                         } input
                         [ {
                           name: "x"
                           data_type: TYPE_FP16
                           dims: [ -1, 3 ]
                         }] instance_group
                         [ { count: 3 kind: KIND_CPU }
                           , {
                             kind: KIND_GPU
                             gpus: [ 1 ]
                           }]
                         version_policy { specific { versions: [ 1, 3 ] } }
                         dynamic_batching {
                           max_queue_delay_microseconds: 100
                           preferred_batch_size: [ 4, 8 ]
                         }
                       )pb",
                       "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->inputs[0].ToString(), "x FP16[-1,3]");
  EXPECT_EQ(c->InstanceCount(), 4);  // an absent count is 1, as in Triton
  EXPECT_EQ(c->instance_groups[1].gpus, std::vector<int>{1});
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_EQ(c->version_policy.versions, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c->dynamic_batching->max_queue_delay_microseconds, 100u);
}

TEST(ModelConfigTest, ErrorsNameTheFileAndLine) {
  absl::Status s =
      ParseModelConfig("name: \"m\"\nmax_batch_size: \"lots\"\n", "cfg.pbtxt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cfg.pbtxt: line 2"));

  EXPECT_THAT(
      std::string(ParseModelConfig("platform: \"tensorflow_savedmodel\"", "c").status().message()),
      HasSubstr("platform 'tensorflow_savedmodel' is not supported"));
  EXPECT_THAT(std::string(ParseModelConfig("max_batch_size: -1", "c").status().message()),
              HasSubstr("max_batch_size must be >= 0"));
  EXPECT_THAT(
      std::string(
          ParseModelConfig("input [ { name: \"x\" dims: [ 1 ] } ]", "c").status().message()),
      HasSubstr("input 'x': data_type is missing"));
  EXPECT_THAT(std::string(ParseModelConfig("input [ { name: \"x\" data_type: TYPE_FP32 dims: "
                                           "[ -2 ] } ]",
                                           "c")
                              .status()
                              .message()),
              HasSubstr("dimension -2 is invalid"));
  EXPECT_THAT(
      std::string(ParseModelConfig("input [ { name: \"x\" data_type: TYPE_FP32 }, { name: \"x\" "
                                   "data_type: TYPE_FP32 } ]",
                                   "c")
                      .status()
                      .message()),
      HasSubstr("input 'x' is listed twice"));
  EXPECT_FALSE(ParseModelConfig("default_model_filename: \"../x.onnx\"", "c").ok());
  EXPECT_EQ(ReadModelConfig("/nonexistent/config.pbtxt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ModelConfigTest, TextRoundTrips) {
  absl::StatusOr<ModelConfig> c =
      ReadModelConfig((testing::SourceDir() / "examples/models/mlp/config.pbtxt").string());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = ModelConfigToText(*c);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(text, "round trip");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_EQ(ModelConfigToText(*again), text);
  EXPECT_THAT(text, HasSubstr("data_type: TYPE_FP32"));
}

// Found by tests/fuzz/model_config_fuzzer: two groups of 2^31-1 overflowed the int sum
// (undefined; in practice it wrapped negative and the model got 1 predictor).
TEST(ModelConfigTest, InstanceCountSaturatesInsteadOfOverflowing) {
  ModelConfig config;
  config.instance_groups.resize(2);
  config.instance_groups[0].count = INT32_MAX;
  config.instance_groups[1].count = INT32_MAX;
  EXPECT_EQ(config.InstanceCount(), INT32_MAX);
  config.instance_groups[1].count = 3;
  EXPECT_EQ(config.InstanceCount(), INT32_MAX);
  config.instance_groups.resize(1);
  config.instance_groups[0].count = 5;
  EXPECT_EQ(config.InstanceCount(), 5);
  config.instance_groups.clear();
  EXPECT_EQ(config.InstanceCount(), 1);

  // The fuzzer's input itself: accepted with a saturated count, or refused as invalid
  // (a range check may refuse such counts at parse time), never a wrapped count.
  const std::string text = testing::ReadFileOrDie(
      testing::SourceDir() / "tests/fixtures/fuzz/model_config/instance_count_overflow.pbtxt");
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(text, "fuzz");
  if (parsed.ok()) {
    EXPECT_EQ(parsed->InstanceCount(), INT32_MAX);
  } else {
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << parsed.status();
  }
}

}  // namespace
}  // namespace ndserve::engine
