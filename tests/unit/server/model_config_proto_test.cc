// model_config.proto is a subset of Triton's with the same field numbers: Triton's
// config.pbtxt files must parse into it, including fields ndserve does not model.
#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "proto/inference.pb.h"
#include "proto/model_config.pb.h"

namespace ndserve {
namespace {

// The way the repository loader parses config.pbtxt: unknown Triton fields are skipped.
bool ParseConfig(const std::string& text, inference::ModelConfig* config) {
  google::protobuf::TextFormat::Parser parser;
  parser.AllowUnknownField(true);
  parser.AllowUnknownExtension(true);
  return parser.ParseFromString(text, config);
}

TEST(ModelConfigProtoTest, ParsesTheExampleRepository) {
  const char* source = std::getenv("NDSERVE_SOURCE_DIR");
  if (source == nullptr) GTEST_SKIP() << "NDSERVE_SOURCE_DIR not set";
  std::ifstream in(std::string(source) + "/examples/models/mlp/config.pbtxt");
  if (!in) GTEST_SKIP() << "examples/models/mlp is not there";
  std::stringstream text;
  text << in.rdbuf();
  inference::ModelConfig config;
  ASSERT_TRUE(ParseConfig(text.str(), &config));
  EXPECT_EQ(config.name(), "mlp");
  EXPECT_EQ(config.max_batch_size(), 64);
  ASSERT_EQ(config.input_size(), 1);
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_TRUE(config.has_dynamic_batching());
}

TEST(ModelConfigProtoTest, TritonFieldsNdserveDoesNotModelAreSkipped) {
  const std::string text = R"pb(
    name: "resnet"
    platform: "onnxruntime_onnx"
    backend: "onnxruntime"
    max_batch_size: 8
    version_policy: { latest: { num_versions: 2 } } input
    [ {
      name: "x"
      data_type: TYPE_FP16
      format: FORMAT_NCHW
      dims: [ 3, 224, 224 ]
    }] output
    [ {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 1000 ]
      label_filename: "labels.txt"
    }] instance_group
    [ {
      name: "g"
      count: 2
      kind: KIND_GPU
      gpus: [ 0, 1 ]
      passive: false
      rate_limiter { priority: 1 }
    }]
    dynamic_batching {
      preferred_batch_size: [ 4, 8 ]
      max_queue_delay_microseconds: 100
      priority_levels: 2
      default_queue_policy { max_queue_size: 16 }
    }
    optimization {
      graph { level: 1 }
      cuda { graphs: true }
      execution_accelerators {
        gpu_execution_accelerator:
        [ {
          name: "tensorrt"
          parameters { key: "precision_mode" value: "FP16" }
        }]
      }
    }
    batch_input:
    [ { kind: BATCH_ELEMENT_COUNT target_name: "n" data_type: TYPE_INT32 }] model_warmup
    [ {
      name: "w"
      batch_size: 1
      inputs {
        key: "x"
        value { zero_data: true }
      }
    }]
    parameters {
      key: "k"
      value { string_value: "v" }
    }
    response_cache { enable: true }
  )pb";
  inference::ModelConfig config;
  ASSERT_TRUE(ParseConfig(text, &config));
  EXPECT_EQ(config.backend(), "onnxruntime");
  EXPECT_EQ(config.version_policy().latest().num_versions(), 2u);
  EXPECT_EQ(config.input(0).format(), inference::ModelInput::FORMAT_NCHW);
  EXPECT_EQ(config.input(0).dims_size(), 3);
  EXPECT_EQ(config.output(0).label_filename(), "labels.txt");
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_GPU);
  EXPECT_EQ(config.instance_group(0).count(), 2);
  EXPECT_EQ(config.instance_group(0).gpus_size(), 2);
  EXPECT_EQ(config.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(config.dynamic_batching().max_queue_delay_microseconds(), 100u);
  ASSERT_EQ(config.model_warmup_size(), 1);
  EXPECT_EQ(config.model_warmup(0).batch_size(), 1u);
  EXPECT_TRUE(config.model_warmup(0).inputs().at("x").zero_data());
  EXPECT_EQ(config.parameters().at("k").string_value(), "v");

  // The strict parser refuses the same text: the loader must use the lenient one.
  inference::ModelConfig strict;
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString(text, &strict));
}

TEST(ModelConfigProtoTest, FieldNumbersAreTritons) {
  // Spot checks of the wire contract; renumbering any of these breaks Triton clients.
  const auto* config = inference::ModelConfig::descriptor();
  EXPECT_EQ(config->FindFieldByName("max_batch_size")->number(), 4);
  EXPECT_EQ(config->FindFieldByName("instance_group")->number(), 7);
  EXPECT_EQ(config->FindFieldByName("dynamic_batching")->number(), 11);
  EXPECT_EQ(config->FindFieldByName("backend")->number(), 17);
  const auto* group = inference::ModelInstanceGroup::descriptor();
  EXPECT_EQ(group->FindFieldByName("kind")->number(), 4);
  EXPECT_EQ(group->FindFieldByName("gpus")->number(), 3);
  EXPECT_EQ(inference::TYPE_BF16, 14);
  EXPECT_EQ(inference::TYPE_STRING, 13);

  const auto* request = inference::ModelInferRequest::descriptor();
  EXPECT_EQ(request->FindFieldByName("raw_input_contents")->number(), 7);
  const auto* response = inference::ModelInferResponse::descriptor();
  EXPECT_EQ(response->FindFieldByName("raw_output_contents")->number(), 6);
  const auto* param = inference::InferParameter::descriptor();
  EXPECT_EQ(param->FindFieldByName("uint64_param")->number(), 5);
  const auto* service = request->file()->FindServiceByName("GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "inference.GRPCInferenceService");
  EXPECT_NE(service->FindMethodByName("RepositoryModelLoad"), nullptr);
}

}  // namespace
}  // namespace ndserve
