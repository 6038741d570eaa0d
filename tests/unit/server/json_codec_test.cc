#include "server/json_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "server/infer_codec.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::string Bytes(std::vector<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

HttpInferRequest Parse(const std::string& body, std::optional<size_t> header = std::nullopt) {
  absl::StatusOr<HttpInferRequest> r = ParseHttpInferRequest(body, header, "m", "2");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : HttpInferRequest{};
}

void ExpectInvalid(const std::string& body, absl::string_view message,
                   std::optional<size_t> header = std::nullopt) {
  absl::StatusOr<HttpInferRequest> r = ParseHttpInferRequest(body, header, "m", "");
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(message)) << body;
}

std::string OneInput(absl::string_view datatype, absl::string_view shape, absl::string_view data) {
  return absl::StrCat(R"({"inputs":[{"name":"x","datatype":")", datatype, R"(","shape":)", shape,
                      R"(,"data":)", data, "}]}");
}

TEST(JsonCodecTest, NestedAndFlatDataGiveTheSameRawBytes) {
  HttpInferRequest flat = Parse(OneInput("FP32", "[2,2]", "[1,2.5,-3,4]"));
  HttpInferRequest nested = Parse(OneInput("FP32", "[2,2]", "[[1,2.5],[-3,4]]"));
  ASSERT_EQ(flat.request.raw_input_contents_size(), 1);
  EXPECT_EQ(flat.request.raw_input_contents(0), Bytes<float>({1, 2.5f, -3, 4}));
  EXPECT_EQ(nested.request.raw_input_contents(0), flat.request.raw_input_contents(0));
  EXPECT_EQ(flat.request.model_name(), "m");
  EXPECT_EQ(flat.request.model_version(), "2");
  EXPECT_EQ(flat.request.inputs(0).name(), "x");
  EXPECT_THAT(flat.request.inputs(0).shape(), ::testing::ElementsAre(2, 2));
  // The translated request passes the shared decoder and validator.
  absl::StatusOr<DecodedInferRequest> decoded = DecodeInferRequest(flat.request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->request().inputs[0].data.size(), 16u);
}

TEST(JsonCodecTest, EveryJsonDatatype) {
  EXPECT_EQ(Parse(OneInput("BOOL", "[2]", "[true,false]")).request.raw_input_contents(0),
            Bytes<uint8_t>({1, 0}));
  EXPECT_EQ(Parse(OneInput("UINT8", "[2]", "[0,255]")).request.raw_input_contents(0),
            Bytes<uint8_t>({0, 255}));
  EXPECT_EQ(Parse(OneInput("UINT16", "[1]", "[65535]")).request.raw_input_contents(0),
            Bytes<uint16_t>({65535}));
  EXPECT_EQ(Parse(OneInput("UINT32", "[1]", "[4294967295]")).request.raw_input_contents(0),
            Bytes<uint32_t>({4294967295u}));
  EXPECT_EQ(Parse(OneInput("UINT64", "[1]", "[18446744073709551615]")).request.raw_input_contents(0),
            Bytes<uint64_t>({18446744073709551615ull}));
  EXPECT_EQ(Parse(OneInput("INT8", "[2]", "[-128,127]")).request.raw_input_contents(0),
            Bytes<int8_t>({-128, 127}));
  EXPECT_EQ(Parse(OneInput("INT16", "[1]", "[-32768]")).request.raw_input_contents(0),
            Bytes<int16_t>({-32768}));
  EXPECT_EQ(Parse(OneInput("INT32", "[1]", "[-7]")).request.raw_input_contents(0),
            Bytes<int32_t>({-7}));
  EXPECT_EQ(Parse(OneInput("INT64", "[1]", "[-9223372036854775808]")).request.raw_input_contents(0),
            Bytes<int64_t>({INT64_MIN}));
  EXPECT_EQ(Parse(OneInput("FP64", "[1]", "[0.1]")).request.raw_input_contents(0),
            Bytes<double>({0.1}));
  std::string bytes = Parse(OneInput("BYTES", "[2]", R"(["ab",""])")).request.raw_input_contents(0);
  EXPECT_EQ(bytes, Bytes<uint32_t>({2}) + "ab" + Bytes<uint32_t>({0}));
}

TEST(JsonCodecTest, ValuesMustFitTheirDatatype) {
  ExpectInvalid(OneInput("INT8", "[1]", "[128]"), "does not fit");
  ExpectInvalid(OneInput("UINT8", "[1]", "[-1]"), "does not fit");
  ExpectInvalid(OneInput("INT32", "[1]", "[1.5]"), "expected an integer, got a number");
  ExpectInvalid(OneInput("FP32", "[1]", R"(["1"])"), "expected a number, got a string");
  ExpectInvalid(OneInput("BOOL", "[1]", "[1]"), "BOOL data must be true/false");
  ExpectInvalid(OneInput("BYTES", "[1]", "[1]"), "BYTES data must be strings");
  ExpectInvalid(OneInput("FP16", "[1]", "[1]"), "send it as binary data");
  ExpectInvalid(OneInput("FP33", "[1]", "[1]"), "unknown datatype 'FP33'");
}

TEST(JsonCodecTest, ElementCountIsTheSharedDecodersToCheck) {
  HttpInferRequest short_data = Parse(OneInput("FP32", "[2,2]", "[1,2,3]"));
  absl::StatusOr<DecodedInferRequest> decoded = DecodeInferRequest(short_data.request);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr("expected 16 bytes"));
}

TEST(JsonCodecTest, MalformedBodies) {
  ExpectInvalid("", "malformed JSON");
  ExpectInvalid("{\"inputs\": [", "malformed JSON");
  ExpectInvalid("[]", "must be a JSON object");
  ExpectInvalid("{}", "'inputs' must be an array");
  ExpectInvalid(R"({"inputs":[3]})", "input 0: must be an object");
  ExpectInvalid(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", "'name' is missing");
  ExpectInvalid(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", "'datatype' is missing");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", "'shape'");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":["1"],"data":[1]}]})",
                "'shape'");
  ExpectInvalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", "'data' is missing");
  ExpectInvalid(R"({"id":5,"inputs":[]})", "'id' must be a string");
  ExpectInvalid(R"({"parameters":[],"inputs":[]})", "parameters must be an object");
  ExpectInvalid(R"({"inputs":[],"outputs":{}})", "'outputs' must be an array");
  // Nesting deeper than any tensor, parsed without recursion and refused.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ExpectInvalid(OneInput("FP32", "[1]", deep), "nested too deeply");
}

TEST(JsonCodecTest, BinaryTensorExtension) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"INT32","shape":[1],"data":[7]},)"
      R"({"name":"c","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}],)"
      R"("parameters":{"binary_data_output":false,"timeout":100}})";
  const std::string binary = Bytes<float>({1, 2}) + Bytes<uint16_t>({0x3c00});
  HttpInferRequest r = Parse(json + binary, json.size());
  ASSERT_EQ(r.request.raw_input_contents_size(), 3);
  EXPECT_EQ(r.request.raw_input_contents(0), Bytes<float>({1, 2}));
  EXPECT_EQ(r.request.raw_input_contents(1), Bytes<int32_t>({7}));
  EXPECT_EQ(r.request.raw_input_contents(2), Bytes<uint16_t>({0x3c00}));
  ASSERT_EQ(r.request.outputs_size(), 2);
  EXPECT_TRUE(r.binary_output.at("y"));
  EXPECT_FALSE(r.binary_output.contains("z"));
  EXPECT_FALSE(r.binary_by_default);
  // HTTP-only parameters stay here; the rest go to the core (timeout is read there).
  EXPECT_FALSE(r.request.parameters().contains("binary_data_output"));
  EXPECT_EQ(r.request.parameters().at("timeout").int64_param(), 100);
  EXPECT_FALSE(r.request.inputs(0).parameters().contains("binary_data_size"));
  EXPECT_TRUE(DecodeInferRequest(r.request).ok());
}

TEST(JsonCodecTest, LyingLengthsAreRefused) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})";
  const std::string binary = Bytes<float>({1, 2});
  // Header length past the body.
  ExpectInvalid(json + binary, "larger than the body", json.size() + binary.size() + 1);
  // Header length cutting the JSON short.
  ExpectInvalid(json + binary, "malformed JSON", json.size() - 2);
  // binary_data_size past the binary part.
  ExpectInvalid(json + binary.substr(0, 4), "runs past the end", json.size());
  // Bytes left over after every input took its share.
  ExpectInvalid(json + binary + "xx", "add up to 8 bytes, but 10", json.size());
  // Binary size with no header: there is no binary part to take the bytes from.
  ExpectInvalid(json + binary, "runs past the end");
}

inference::ModelInferResponse Response() {
  inference::ModelInferResponse r;
  r.set_model_name("m");
  r.set_model_version("1");
  r.set_id("req-1");
  auto add = [&r](const char* name, const char* dtype, std::vector<int64_t> shape,
                  std::string raw) {
    auto* t = r.add_outputs();
    t->set_name(name);
    t->set_datatype(dtype);
    t->mutable_shape()->Add(shape.begin(), shape.end());
    r.add_raw_output_contents(std::move(raw));
  };
  add("f", "FP32", {1, 2}, Bytes<float>({0.5f, -2}));
  add("i", "INT64", {1}, Bytes<int64_t>({-5}));
  add("b", "BOOL", {2}, Bytes<uint8_t>({1, 0}));
  add("s", "BYTES", {1}, Bytes<uint32_t>({2}) + "hi");
  add("h", "FP16", {1}, Bytes<uint16_t>({0x3c00}));
  return r;
}

TEST(JsonCodecTest, ResponseAsJson) {
  absl::StatusOr<HttpBody> out = WriteHttpInferResponse(Response(), HttpInferRequest{});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->json_bytes.has_value());
  rapidjson::Document doc;
  doc.Parse(out->body.c_str());
  ASSERT_FALSE(doc.HasParseError()) << out->body;
  EXPECT_STREQ(doc["model_name"].GetString(), "m");
  EXPECT_STREQ(doc["model_version"].GetString(), "1");
  EXPECT_STREQ(doc["id"].GetString(), "req-1");
  const auto& outputs = doc["outputs"];
  ASSERT_EQ(outputs.Size(), 5u);
  EXPECT_EQ(outputs[0]["shape"][1].GetInt(), 2);
  EXPECT_EQ(outputs[0]["data"][0].GetDouble(), 0.5);
  EXPECT_EQ(outputs[0]["data"][1].GetDouble(), -2);
  EXPECT_EQ(outputs[1]["data"][0].GetInt64(), -5);
  EXPECT_TRUE(outputs[2]["data"][0].GetBool());
  EXPECT_FALSE(outputs[2]["data"][1].GetBool());
  EXPECT_STREQ(outputs[3]["data"][0].GetString(), "hi");
  EXPECT_EQ(outputs[4]["data"][0].GetDouble(), 1.0);
}

TEST(JsonCodecTest, ResponseWithBinaryOutputs) {
  HttpInferRequest how;
  how.binary_by_default = true;
  how.binary_output["i"] = false;
  absl::StatusOr<HttpBody> out = WriteHttpInferResponse(Response(), how);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->json_bytes.has_value());
  const std::string json = out->body.substr(0, *out->json_bytes);
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  EXPECT_EQ(doc["outputs"][0]["parameters"]["binary_data_size"].GetInt(), 8);
  EXPECT_FALSE(doc["outputs"][0].HasMember("data"));
  EXPECT_EQ(doc["outputs"][1]["data"][0].GetInt64(), -5);
  EXPECT_EQ(out->body.substr(*out->json_bytes),
            Bytes<float>({0.5f, -2}) + Bytes<uint8_t>({1, 0}) + Bytes<uint32_t>({2}) + "hi" +
                Bytes<uint16_t>({0x3c00}));
}

// Outputs past the short-string size live on the heap: every byte must come from the
// response, in JSON and in the binary part, not from a copy that is gone by then.
TEST(JsonCodecTest, LargeOutputsKeepEveryByte) {
  std::vector<float> values(300);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 7.0f;
  inference::ModelInferResponse r;
  r.set_model_name("m");
  for (const char* name : {"a", "b"}) {
    auto* t = r.add_outputs();
    t->set_name(name);
    t->set_datatype("FP32");
    t->add_shape(static_cast<int64_t>(values.size()));
    r.add_raw_output_contents(Bytes<float>(values));
  }
  HttpInferRequest how;
  how.binary_output["b"] = true;
  absl::StatusOr<HttpBody> out = WriteHttpInferResponse(r, how);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->json_bytes.has_value());
  EXPECT_EQ(out->body.substr(*out->json_bytes), Bytes<float>(values));
  const std::string json = out->body.substr(0, *out->json_bytes);
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  const auto& data = doc["outputs"][0]["data"];
  ASSERT_EQ(data.Size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(static_cast<float>(data[static_cast<rapidjson::SizeType>(i)].GetDouble()),
              values[i])
        << "element " << i;
  }
}

TEST(JsonCodecTest, NonUtf8BytesMustBeBinary) {
  inference::ModelInferResponse r;
  r.set_model_name("m");
  auto* t = r.add_outputs();
  t->set_name("s");
  t->set_datatype("BYTES");
  t->add_shape(1);
  r.add_raw_output_contents(Bytes<uint32_t>({1}) + "\xff");
  absl::StatusOr<HttpBody> out = WriteHttpInferResponse(r, HttpInferRequest{});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("binary_data"));
  HttpInferRequest how;
  how.binary_output["s"] = true;
  EXPECT_TRUE(WriteHttpInferResponse(r, how).ok());
}

TEST(JsonCodecTest, ErrorsAndStatuses) {
  EXPECT_EQ(ErrorJson("bad \"x\""), R"({"error":"bad \"x\""})");
  rapidjson::Document doc;
  const std::string invalid = ErrorJson("model '\xff'");
  doc.Parse(invalid.c_str());
  EXPECT_FALSE(doc.HasParseError());
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kOk), 200);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kFailedPrecondition), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kResourceExhausted), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kDeadlineExceeded), 504);
}

TEST(JsonCodecTest, MetadataUsesNumbersForShapes) {
  inference::ModelMetadataResponse md;
  md.set_name("mlp");
  md.add_versions("1");
  md.set_platform("onnxruntime_onnx");
  auto* in = md.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(-1);
  in->add_shape(4);
  EXPECT_EQ(ModelMetadataJson(md),
            R"({"name":"mlp","versions":["1"],"platform":"onnxruntime_onnx","inputs":[{"name":"x",)"
            R"("datatype":"FP32","shape":[-1,4]}],"outputs":[]})");
}

TEST(JsonCodecTest, OptionalBodies) {
  EXPECT_FALSE(OptionalBodyBool("", "ready")->has_value());
  EXPECT_FALSE(OptionalBodyBool(" \n", "ready")->has_value());
  EXPECT_TRUE(**OptionalBodyBool(R"({"ready": true})", "ready"));
  EXPECT_FALSE(OptionalBodyBool(R"({"other": 1})", "ready")->has_value());
  EXPECT_FALSE(OptionalBodyBool("[1]", "ready").ok());
  EXPECT_FALSE(OptionalBodyBool(R"({"ready": 1})", "ready").ok());
}

}  // namespace
}  // namespace ndserve
