// config.pbtxt parsing (protobuf text format into Triton-numbered ModelConfig).

#include "engine/model_config.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/text.h"
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

TEST(ModelConfigTest, QueuePolicyParsesAndRoundTrips) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(R"pb(
                         name: "m"
                         max_batch_size: 8
                         dynamic_batching {
                           default_queue_policy {
                             timeout_action: DELAY
                             default_timeout_microseconds: 5000
                             allow_timeout_override: true
                             max_queue_size: 16
                           }
                         }
                       )pb",
                                                   "test");
  ASSERT_TRUE(c.ok()) << c.status();
  const QueuePolicyConfig& p = c->dynamic_batching->default_queue_policy;
  EXPECT_EQ(p.timeout_action, QueuePolicyConfig::TimeoutAction::kDelay);
  EXPECT_EQ(p.default_timeout_microseconds, 5000u);
  EXPECT_TRUE(p.allow_timeout_override);
  EXPECT_EQ(p.max_queue_size, 16u);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToText(*c), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->dynamic_batching->default_queue_policy, p);
  // Absent: no limit, no timeout, REJECT.
  absl::StatusOr<ModelConfig> plain =
      ParseModelConfig("name: \"m\" dynamic_batching { }", "plain");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->dynamic_batching->default_queue_policy, QueuePolicyConfig{});
  EXPECT_EQ(ModelConfigToText(*plain).find("default_queue_policy"), std::string::npos);
}

TEST(ModelConfigTest, PriorityLevelsParseAreRangeCheckedAndRoundTrip) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(R"pb(
                         name: "m"
                         max_batch_size: 8
                         dynamic_batching {
                           priority_levels: 3
                           default_priority_level: 2
                           priority_queue_policy {
                             key: 3
                             value: { max_queue_size: 4 default_timeout_microseconds: 700 }
                           }
                         }
                       )pb",
                                                   "test");
  ASSERT_TRUE(c.ok()) << c.status();
  const DynamicBatchingConfig& db = *c->dynamic_batching;
  EXPECT_EQ(db.priority_levels, 3u);
  EXPECT_EQ(db.default_priority_level, 2u);
  ASSERT_EQ(db.priority_queue_policy.size(), 1u);
  EXPECT_EQ(db.priority_queue_policy.at(3).max_queue_size, 4u);
  EXPECT_EQ(db.priority_queue_policy.at(3).default_timeout_microseconds, 700u);
  absl::StatusOr<ModelConfig> again = ParseModelConfig(ModelConfigToText(*c), "again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->dynamic_batching->priority_levels, 3u);
  EXPECT_EQ(again->dynamic_batching->default_priority_level, 2u);
  EXPECT_EQ(again->dynamic_batching->priority_queue_policy, db.priority_queue_policy);

  auto message = [](const std::string& text) {
    absl::Status s = ParseModelConfig("max_batch_size: 8 dynamic_batching { " + text + " }",
                                      "repo/m/config.pbtxt")
                         .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(s.message());
  };
  EXPECT_THAT(message("priority_levels: 2"),
              HasSubstr("default_priority_level must be from 1 to priority_levels (2), not 0"));
  EXPECT_THAT(message("priority_levels: 2 default_priority_level: 3"),
              HasSubstr("default_priority_level must be from 1 to priority_levels (2), not 3"));
  EXPECT_THAT(message("priority_levels: 2 default_priority_level: 1 "
                      "priority_queue_policy { key: 5 value: { } }"),
              HasSubstr("priority_queue_policy level must be from 1 to priority_levels (2), "
                        "not 5"));
  EXPECT_THAT(message("default_priority_level: 1"), HasSubstr("need priority_levels"));
  EXPECT_THAT(message("priority_levels: 18446744073709551615 default_priority_level: 1"),
              HasSubstr("priority_levels must be at most 1024"));
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
              HasSubstr("max_batch_size must be from 0 to 1048576, not -1"));
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

// Values that make the process allocate or wait in proportion are range-checked at load,
// naming the file and the field: before, count 2147483647 grew the process to gigabytes,
// two such groups overflowed to a small total, max_batch_size 2147483647 was accepted
// and a queue delay of 2^64-1 microseconds was read as none.
TEST(ModelConfigTest, OutOfRangeValuesAreRefusedNamingTheField) {
  auto message = [](const std::string& text) {
    absl::Status s = ParseModelConfig(text, "repo/m/config.pbtxt").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(s.message());
  };
  EXPECT_THAT(message("instance_group [ { count: 2147483647 } ]"),
              HasSubstr("repo/m/config.pbtxt: instance_group count must be from 0 to 1024, "
                        "not 2147483647"));
  EXPECT_THAT(message("instance_group [ { count: 1000 }, { count: 1000 } ]"),
              HasSubstr("repo/m/config.pbtxt: the instance_group counts add up to more than 1024"));
  EXPECT_THAT(message("instance_group [ { count: 1 kind: KIND_GPU gpus: [ -1 ] } ]"),
              HasSubstr("instance_group gpus must be >= 0"));
  EXPECT_THAT(message("max_batch_size: 2147483647"),
              HasSubstr("repo/m/config.pbtxt: max_batch_size must be from 0 to 1048576"));
  EXPECT_THAT(message("max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: "
                      "18446744073709551615 }"),
              HasSubstr("repo/m/config.pbtxt: dynamic_batching max_queue_delay_microseconds "
                        "must be at most 3600000000"));
  EXPECT_THAT(message("max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 16 ] }"),
              HasSubstr("preferred_batch_size must be from 1 to max_batch_size (8), not 16"));
  EXPECT_THAT(message("max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 0 ] }"),
              HasSubstr("preferred_batch_size must be from 1"));
  EXPECT_THAT(message(absl::StrCat("input [ { name: \"", std::string(300, 'x'),
                                   "\" data_type: TYPE_FP32 dims: [ 1 ] } ]")),
              HasSubstr("input name 'xxx"));

  // The limits themselves are accepted.
  absl::StatusOr<ModelConfig> c = ParseModelConfig(
      "max_batch_size: 1048576 instance_group [ { count: 1000 }, { count: 24 } ] "
      "dynamic_batching { max_queue_delay_microseconds: 3600000000 preferred_batch_size: [ "
      "1048576 ] }",
      "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->InstanceCount(), 1024);
  EXPECT_EQ(c->dynamic_batching->max_queue_delay_microseconds, 3600000000u);
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
