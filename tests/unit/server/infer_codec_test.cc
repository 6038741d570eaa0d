// ModelInferRequest -> engine request decoding and response encoding: every datatype,
// raw and typed, and every malformed request, each with its code and a message that
// names the tensor.
#include "server/infer_codec.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> Values(absl::Span<const uint8_t> data) {
  std::vector<T> out(data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
  return out;
}

std::string LengthPrefixed(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out.append(e);
  }
  return out;
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* r, const std::string& name,
                                              const std::string& datatype,
                                              std::vector<int64_t> shape) {
  ModelInferRequest::InferInputTensor* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

ModelInferRequest RawRequest(const std::string& datatype, std::vector<int64_t> shape,
                             std::string bytes) {
  ModelInferRequest r;
  r.set_model_name("m");
  AddInput(&r, "x", datatype, std::move(shape));
  r.add_raw_input_contents(std::move(bytes));
  return r;
}

void ExpectInvalid(const ModelInferRequest& r, const std::string& fragment) {
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_FALSE(d.ok()) << "expected an error containing: " << fragment;
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr(fragment));
}

// ---- Raw contents: every datatype, passed through as a view --------------------------

struct RawCase {
  std::string datatype;
  DType dtype;
  size_t element_size;
};

class RawDecodeTest : public ::testing::TestWithParam<RawCase> {};

TEST_P(RawDecodeTest, DecodesAsViewWithoutCopy) {
  const RawCase& c = GetParam();
  std::string bytes(6 * c.element_size, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 1);
  ModelInferRequest r = RawRequest(c.datatype, {2, 3}, bytes);
  r.set_model_version("4");
  r.set_id("req-1");
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  const engine::InferenceRequest& req = d->request();
  EXPECT_EQ(req.model_name, "m");
  EXPECT_EQ(req.model_version, 4);
  EXPECT_EQ(req.id, "req-1");
  ASSERT_EQ(req.inputs.size(), 1u);
  EXPECT_EQ(req.inputs[0].name, "x");
  EXPECT_EQ(req.inputs[0].dtype, c.dtype);
  EXPECT_THAT(req.inputs[0].shape, ElementsAre(2, 3));
  // A view over the request's own bytes: no copy.
  EXPECT_EQ(reinterpret_cast<const char*>(req.inputs[0].data.data()),
            r.raw_input_contents(0).data());
  EXPECT_EQ(req.inputs[0].data.size(), bytes.size());
  EXPECT_EQ(d->owned_bytes(), 0u);
}

TEST_P(RawDecodeTest, WrongByteCountNamesTensorShapeAndSizes) {
  const RawCase& c = GetParam();
  ModelInferRequest r = RawRequest(c.datatype, {1, 64}, std::string(64 * c.element_size - 1, 'a'));
  ExpectInvalid(
      r, absl::StrCat("input 'x': expected ", 64 * c.element_size, " bytes for shape [1,64] ",
                      c.datatype, ", got ", 64 * c.element_size - 1));
}

INSTANTIATE_TEST_SUITE_P(
    AllFixedSizeTypes, RawDecodeTest,
    ::testing::Values(RawCase{"BOOL", DType::kBool, 1}, RawCase{"UINT8", DType::kUint8, 1},
                      RawCase{"UINT16", DType::kUint16, 2}, RawCase{"UINT32", DType::kUint32, 4},
                      RawCase{"UINT64", DType::kUint64, 8}, RawCase{"INT8", DType::kInt8, 1},
                      RawCase{"INT16", DType::kInt16, 2}, RawCase{"INT32", DType::kInt32, 4},
                      RawCase{"INT64", DType::kInt64, 8}, RawCase{"FP16", DType::kFp16, 2},
                      RawCase{"BF16", DType::kBf16, 2}, RawCase{"FP32", DType::kFp32, 4},
                      RawCase{"FP64", DType::kFp64, 8}),
    [](const ::testing::TestParamInfo<RawCase>& info) { return info.param.datatype; });

TEST(InferCodecTest, ExactMessageOfTheIssue) {
  ModelInferRequest r = RawRequest("FP32", {1, 64}, std::string(255, 'a'));
  ExpectInvalid(r, "input 'x': expected 256 bytes for shape [1,64] FP32, got 255");
}

TEST(InferCodecTest, RawBytesTensorIsValidatedAndViewed) {
  const std::string data = LengthPrefixed({"ab", "", "cde"});
  ModelInferRequest r = RawRequest("BYTES", {3}, data);
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->request().inputs[0].dtype, DType::kBytes);
  EXPECT_EQ(d->request().inputs[0].data.size(), data.size());
  EXPECT_EQ(reinterpret_cast<const char*>(d->request().inputs[0].data.data()),
            r.raw_input_contents(0).data());
}

TEST(InferCodecTest, RawBytesWithTooFewElements) {
  ExpectInvalid(RawRequest("BYTES", {3}, LengthPrefixed({"ab", "c"})),
                "input 'x': BYTES data holds 2 elements, the shape needs 3");
}

TEST(InferCodecTest, RawBytesWithTooManyElements) {
  ExpectInvalid(RawRequest("BYTES", {1}, LengthPrefixed({"ab", "c"})),
                "input 'x': BYTES data holds 2 elements, the shape needs 1");
}

TEST(InferCodecTest, RawBytesLengthRunsPastTheEnd) {
  std::string data = LengthPrefixed({"abcd"});
  data.pop_back();
  ExpectInvalid(RawRequest("BYTES", {1}, data),
                "input 'x': BYTES element 0 of 4 bytes runs past the end of the data (3 bytes "
                "left)");
}

TEST(InferCodecTest, RawBytesTruncatedPrefix) {
  ExpectInvalid(RawRequest("BYTES", {2}, LengthPrefixed({"a"}) + std::string("\x01\x00", 2)),
                "input 'x': BYTES element 1 has a truncated length prefix (2 bytes left)");
}

TEST(InferCodecTest, RawBytesHugeLengthDoesNotOverflow) {
  ExpectInvalid(RawRequest("BYTES", {1}, std::string("\xff\xff\xff\xff", 4)),
                "runs past the end of the data");
}

TEST(InferCodecTest, ScalarAndEmptyShapes) {
  // [] is one element; [0,5] none.
  absl::StatusOr<DecodedInferRequest> scalar =
      DecodeInferRequest(RawRequest("FP32", {}, Bytes<float>({1.5f})));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  absl::StatusOr<DecodedInferRequest> empty = DecodeInferRequest(RawRequest("FP32", {0, 5}, ""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->request().inputs[0].data.size(), 0u);
}

// ---- Typed contents: every datatype with a typed field ---------------------------

TEST(InferCodecTest, TypedBool) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", "BOOL", {3});
  for (bool b : {true, false, true}) in->mutable_contents()->add_bool_contents(b);
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(Values<uint8_t>(d->request().inputs[0].data), ElementsAre(1, 0, 1));
  EXPECT_EQ(d->owned_bytes(), 3u);
}

template <typename Elem, typename Add>
void ExpectTyped(const std::string& datatype, DType dtype, std::vector<Elem> values, Add add) {
  SCOPED_TRACE(datatype);
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", datatype, {static_cast<int64_t>(values.size())});
  for (Elem v : values) add(in->mutable_contents(), v);
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->request().inputs[0].dtype, dtype);
  EXPECT_EQ(d->request().inputs[0].data.size(), values.size() * sizeof(Elem));
  EXPECT_EQ(Values<Elem>(d->request().inputs[0].data), values);
}

TEST(InferCodecTest, TypedIntegers) {
  auto add_int = [](inference::InferTensorContents* c, int64_t v) {
    c->add_int_contents(static_cast<int32_t>(v));
  };
  auto add_uint = [](inference::InferTensorContents* c, uint64_t v) {
    c->add_uint_contents(static_cast<uint32_t>(v));
  };
  ExpectTyped<int8_t>("INT8", DType::kInt8, {-128, 0, 127}, add_int);
  ExpectTyped<int16_t>("INT16", DType::kInt16, {-32768, 5, 32767}, add_int);
  ExpectTyped<int32_t>("INT32", DType::kInt32, {std::numeric_limits<int32_t>::min(), 0, 7},
                       add_int);
  ExpectTyped<uint8_t>("UINT8", DType::kUint8, {0, 200, 255}, add_uint);
  ExpectTyped<uint16_t>("UINT16", DType::kUint16, {0, 65535}, add_uint);
  ExpectTyped<uint32_t>("UINT32", DType::kUint32, {0, 4000000000u}, add_uint);
  ExpectTyped<int64_t>(
      "INT64", DType::kInt64, {std::numeric_limits<int64_t>::min(), -1, 1LL << 40},
      [](inference::InferTensorContents* c, int64_t v) { c->add_int64_contents(v); });
  ExpectTyped<uint64_t>(
      "UINT64", DType::kUint64, {0, ~0ULL},
      [](inference::InferTensorContents* c, uint64_t v) { c->add_uint64_contents(v); });
}

TEST(InferCodecTest, TypedFloats) {
  ExpectTyped<float>("FP32", DType::kFp32, {1.5f, -2.25f, 0.f},
                     [](inference::InferTensorContents* c, float v) { c->add_fp32_contents(v); });
  ExpectTyped<double>("FP64", DType::kFp64, {1e300, -0.5},
                      [](inference::InferTensorContents* c, double v) { c->add_fp64_contents(v); });
}

TEST(InferCodecTest, TypedBytesBecomeLengthPrefixed) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "s", "BYTES", {2});
  in->mutable_contents()->add_bytes_contents("hello");
  in->mutable_contents()->add_bytes_contents("");
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  const absl::Span<const uint8_t> data = d->request().inputs[0].data;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(data.data()), data.size()),
            LengthPrefixed({"hello", ""}));
}

TEST(InferCodecTest, TypedHalfPrecisionIsRefused) {
  for (const char* datatype : {"FP16", "BF16"}) {
    ModelInferRequest r;
    auto* in = AddInput(&r, "h", datatype, {1});
    in->mutable_contents()->add_fp32_contents(1.0f);
    ExpectInvalid(
        r, absl::StrCat("input 'h': ", datatype, " data must be sent in raw_input_contents"));
  }
}

TEST(InferCodecTest, TypedCountMismatch) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", "FP32", {1, 64});
  for (int i = 0; i < 63; ++i) in->mutable_contents()->add_fp32_contents(1.0f);
  ExpectInvalid(r,
                "input 'x': expected 64 values in contents.fp32_contents for shape [1,64] FP32, "
                "got 63");
}

TEST(InferCodecTest, TypedMissingContentsIsACountMismatch) {
  ModelInferRequest r;
  AddInput(&r, "x", "INT32", {2});
  ExpectInvalid(r, "input 'x': expected 2 values in contents.int_contents");
}

TEST(InferCodecTest, TypedWrongField) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", "FP32", {1});
  in->mutable_contents()->add_int_contents(1);
  ExpectInvalid(r, "input 'x': FP32 data goes in fp32_contents, but int_contents is set");
}

TEST(InferCodecTest, TypedOutOfRange) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", "INT8", {2});
  in->mutable_contents()->add_int_contents(1);
  in->mutable_contents()->add_int_contents(300);
  ExpectInvalid(r, "input 'x': int_contents[1] = 300 does not fit INT8");
  ModelInferRequest u;
  auto* uin = AddInput(&u, "y", "UINT16", {1});
  uin->mutable_contents()->add_uint_contents(70000);
  ExpectInvalid(u, "input 'y': uint_contents[0] = 70000 does not fit UINT16");
}

TEST(InferCodecTest, MixedRawAndTypedInputsOwnOnlyTheTyped) {
  // Several typed inputs: every view stays valid after the decoded request moves.
  ModelInferRequest r;
  for (int i = 0; i < 8; ++i) {
    auto* in = AddInput(&r, absl::StrCat("t", i), "INT64", {2});
    in->mutable_contents()->add_int64_contents(i);
    in->mutable_contents()->add_int64_contents(-i);
  }
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  DecodedInferRequest moved = *std::move(d);
  for (int i = 0; i < 8; ++i) {
    EXPECT_THAT(Values<int64_t>(moved.request().inputs[i].data), ElementsAre(i, -i));
  }
}

// ---- Request-level errors ----------------------------------------------------------

TEST(InferCodecTest, UnknownDatatype) {
  ExpectInvalid(RawRequest("FP33", {1}, "abcd"), "input 'x': unknown datatype 'FP33'");
  // The wire spelling is exact: config spellings are not datatypes.
  ExpectInvalid(RawRequest("TYPE_FP32", {1}, "abcd"), "input 'x': unknown datatype 'TYPE_FP32'");
  ExpectInvalid(RawRequest("fp32", {1}, "abcd"), "input 'x': unknown datatype 'fp32'");
}

TEST(InferCodecTest, NegativeDimension) {
  ExpectInvalid(RawRequest("FP32", {1, -4}, "abcd"),
                "input 'x': shape [1,-4] has a negative dimension");
  ExpectInvalid(RawRequest("FP32", {0, -1}, ""),
                "input 'x': shape [0,-1] has a negative dimension");
}

TEST(InferCodecTest, HugeDimensionOverflowsElementCountWithoutAllocating) {
  const int64_t big = int64_t{1} << 40;
  ExpectInvalid(RawRequest("FP32", {big, big}, "abcd"),
                "input 'x': shape [1099511627776,1099511627776] has too many elements");
}

TEST(InferCodecTest, HugeDimensionOverflowsByteCount) {
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  ExpectInvalid(RawRequest("FP64", {big}, "abcd"), "input 'x': shape [");
  ExpectInvalid(RawRequest("FP64", {big}, "abcd"), "is too large");
}

TEST(InferCodecTest, HugeDimensionTypedIsACountMismatch) {
  ModelInferRequest r;
  auto* in = AddInput(&r, "x", "FP32", {int64_t{1} << 50});
  in->mutable_contents()->add_fp32_contents(1.0f);
  ExpectInvalid(r, "input 'x': expected 1125899906842624 values in contents.fp32_contents");
}

TEST(InferCodecTest, RawCountDiffersFromInputs) {
  ModelInferRequest r;
  AddInput(&r, "a", "FP32", {1});
  AddInput(&r, "b", "FP32", {1});
  r.add_raw_input_contents(Bytes<float>({1.f}));
  ExpectInvalid(r,
                "input 'b' has none; expected one raw_input_contents per input (2 inputs), "
                "got 1");
  r.add_raw_input_contents(Bytes<float>({1.f}));
  r.add_raw_input_contents(Bytes<float>({1.f}));
  ExpectInvalid(r, "expected one raw_input_contents per input (2 inputs), got 3");
}

TEST(InferCodecTest, BothRawAndTyped) {
  ModelInferRequest r = RawRequest("FP32", {1}, Bytes<float>({1.f}));
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1.f);
  ExpectInvalid(r, "input 'x': both raw_input_contents and typed contents given");
}

TEST(InferCodecTest, ZeroInputs) {
  ModelInferRequest r;
  r.set_model_name("mlp");
  ExpectInvalid(r, "request for model 'mlp' has no inputs");
}

TEST(InferCodecTest, UnnamedInput) {
  ExpectInvalid(
      [] {
        ModelInferRequest r = RawRequest("FP32", {1}, "abcd");
        r.mutable_inputs(0)->clear_name();
        return r;
      }(),
      "input 0 has no name");
}

TEST(InferCodecTest, BadModelVersion) {
  ModelInferRequest r = RawRequest("FP32", {1}, "abcd");
  r.set_model_version("latest");
  ExpectInvalid(r, "model version 'latest' is not a non-negative integer");
  r.set_model_version("-1");
  ExpectInvalid(r, "model version '-1'");
}

TEST(InferCodecTest, RequestedOutputsKeepTheirOrder) {
  ModelInferRequest r = RawRequest("FP32", {1}, "abcd");
  r.add_outputs()->set_name("b");
  r.add_outputs()->set_name("a");
  absl::StatusOr<DecodedInferRequest> d = DecodeInferRequest(r);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->request().requested_outputs, ElementsAre("b", "a"));
  r.add_outputs();
  ExpectInvalid(r, "requested output 2 has no name");
}

TEST(InferCodecTest, WireDTypeIsExact) {
  EXPECT_EQ(WireDType("FP32"), DType::kFp32);
  EXPECT_EQ(WireDType("BYTES"), DType::kBytes);
  EXPECT_EQ(WireDType("STRING"), std::nullopt);
  EXPECT_EQ(WireDType(""), std::nullopt);
}

// ---- Response encoding ------------------------------------------------------------

TEST(InferCodecTest, EncodesOutputsAsRaw) {
  engine::InferenceResponse response;
  response.model_name = "mlp";
  response.model_version = 3;
  response.id = "abc";
  engine::InferOutputTensor& out = response.outputs.emplace_back();
  out.name = "probabilities";
  out.dtype = DType::kFp32;
  out.shape = {1, 2};
  const std::string bytes = Bytes<float>({0.25f, 0.75f});
  out.data.assign(bytes.begin(), bytes.end());
  engine::InferOutputTensor& second = response.outputs.emplace_back();
  second.name = "ids";
  second.dtype = DType::kInt64;
  second.shape = {0};

  ModelInferResponse wire;
  wire.set_model_name("stale");
  EncodeInferResponse(response, &wire);
  EXPECT_EQ(wire.model_name(), "mlp");
  EXPECT_EQ(wire.model_version(), "3");
  EXPECT_EQ(wire.id(), "abc");
  ASSERT_EQ(wire.outputs_size(), 2);
  ASSERT_EQ(wire.raw_output_contents_size(), 2);
  EXPECT_EQ(wire.outputs(0).name(), "probabilities");
  EXPECT_EQ(wire.outputs(0).datatype(), "FP32");
  EXPECT_THAT(wire.outputs(0).shape(), ElementsAre(1, 2));
  EXPECT_EQ(wire.raw_output_contents(0), bytes);
  EXPECT_EQ(wire.outputs(1).datatype(), "INT64");
  EXPECT_EQ(wire.raw_output_contents(1), "");
  // The size the handler checks before encoding bounds the encoded message.
  EXPECT_GE(EncodedResponseBytes(response), wire.ByteSizeLong());
  EXPECT_LT(EncodedResponseBytes(response), wire.ByteSizeLong() + 512);
}

TEST(InferCodecTest, EncodedResponseBytesBoundsLargeResponses) {
  engine::InferenceResponse response;
  response.model_name = std::string(200, 'm');
  for (int i = 0; i < 50; ++i) {
    engine::InferOutputTensor& out = response.outputs.emplace_back();
    out.name = std::string(200, 'o') + std::to_string(i);
    out.dtype = DType::kFp32;
    out.shape = {int64_t{1} << 40, 3, 1 << 20};
    out.data.assign(1000 + i, 'd');
  }
  ModelInferResponse wire;
  EncodeInferResponse(response, &wire);
  EXPECT_GE(EncodedResponseBytes(response), wire.ByteSizeLong());
}

// Names are checked before anything quotes them: a 100 KB name used to be echoed whole
// into the error, which then overflowed gRPC's metadata limit.
TEST(InferCodecTest, LongOrBinaryNamesAreRefusedUpFront) {
  const std::string huge(100'000, 'n');
  ModelInferRequest r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.set_model_name(huge);
  ExpectInvalid(r, "model name 'nnnn");
  EXPECT_LT(DecodeInferRequest(r).status().message().size(), 200u);

  r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.mutable_inputs(0)->set_name(huge);
  ExpectInvalid(r, "input name 'nnnn");
  EXPECT_THAT(std::string(DecodeInferRequest(r).status().message()),
              HasSubstr("100000 bytes long; at most 256"));

  r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.add_outputs()->set_name(huge);
  ExpectInvalid(r, "requested output name 'nnnn");

  r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.set_id(huge);
  ExpectInvalid(r, "request id 'nnnn");

  r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.set_model_name("m\xFF");
  ExpectInvalid(r, "model name 'm\xEF\xBF\xBD' is not valid UTF-8");

  // 256 bytes is still a name.
  r = RawRequest("FP32", {1}, Bytes<float>({1}));
  r.set_model_name(std::string(256, 'm'));
  EXPECT_TRUE(DecodeInferRequest(r).ok());
}

}  // namespace
}  // namespace ndserve
