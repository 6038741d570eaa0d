// The PyTorch exports (tools/gen_torch_models.py) served by a real `ndserved` over
// loopback gRPC, its model repository being the generated folder: no config.pbtxt
// anywhere. A model that tests/fixtures/torch_unsupported.txt lists must be reported
// UNAVAILABLE with a reason naming the node, and an explicit RepositoryModelLoad must
// fail with UNIMPLEMENTED or INVALID_ARGUMENT saying the same, while the daemon keeps
// serving the others. Every other model must be ready, report the exporter's input and
// output names in ModelMetadata (dynamic dimensions as -1), and answer ModelInfer with
// PyTorch's outputs on every input set. A listed model that is served correctly fails the
// test until it is taken off the list.

#include <grpcpp/client_context.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "kernels/cast_convert.h"
#include "tests/integration/integration_support.h"
#include "tests/torch/torch_fixtures.h"

namespace ndserve::testing {
namespace {

namespace tf = ::ndserve::torch_fixtures;
using Stub = inference::GRPCInferenceService::Stub;

std::unique_ptr<grpc::ClientContext> Context(int seconds = 120) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

bool DaemonOnCuda() {
  const char* device = std::getenv("NDSERVE_TEST_DEVICE");
  return device != nullptr && std::string(device).rfind("cuda", 0) == 0;
}

// Raw FP32 or FP16 tensor bytes as floats.
std::vector<float> Floats(const std::string& datatype, absl::string_view bytes) {
  const bool half = datatype == "FP16";
  std::vector<float> v(bytes.size() / (half ? 2 : 4));
  for (size_t k = 0; k < v.size(); ++k) {
    if (half) {
      kernels::Half h;
      std::memcpy(&h.bits, bytes.data() + 2 * k, 2);
      v[k] = kernels::HalfToFloat(h);
    } else {
      std::memcpy(&v[k], bytes.data() + 4 * k, 4);
    }
  }
  return v;
}

// ModelInfer on every input set of `model`; a description of each mismatch (empty: all
// match).
std::vector<std::string> Mismatches(Stub& stub, const std::string& model) {
  std::vector<std::string> problems;
  for (const auto& dir : tf::CaseDirs(model)) {
    const std::string set = dir.filename().string();
    absl::StatusOr<ReferenceCase> c = ReadReferenceCaseAt(dir.string());
    absl::StatusOr<std::map<std::string, tf::Tolerance>> tol = tf::OutputTolerances(dir);
    if (!c.ok() || !tol.ok()) {
      problems.push_back(
          absl::StrCat(set, ": ", c.ok() ? tol.status().ToString() : c.status().ToString()));
      continue;
    }
    inference::ModelInferResponse response;
    grpc::Status s = stub.ModelInfer(Context().get(), RequestFor(model, *c), &response);
    if (!s.ok()) {
      problems.push_back(absl::StrCat(set, ": ModelInfer: ", s.error_message()));
      continue;
    }
    if (response.outputs_size() != static_cast<int>(c->outputs.size()) ||
        response.raw_output_contents_size() != response.outputs_size()) {
      problems.push_back(
          absl::StrCat(set, ": ", response.outputs_size(), " outputs, want ", c->outputs.size()));
      continue;
    }
    for (size_t i = 0; i < c->outputs.size(); ++i) {
      const CaseTensor& want = c->outputs[i];
      const auto& got = response.outputs(i);
      const std::vector<int64_t> shape(got.shape().begin(), got.shape().end());
      if (got.name() != want.name || got.datatype() != want.datatype || shape != want.shape) {
        problems.push_back(absl::StrCat(set, ": output ", i, " is ", got.name(), " ",
                                        got.datatype(), " [", absl::StrJoin(shape, ","), "], want ",
                                        want.name, " ", want.datatype, " [",
                                        absl::StrJoin(want.shape, ","), "]"));
        continue;
      }
      const std::string& bytes = response.raw_output_contents(i);
      if (want.datatype == "INT64") {  // a detector's labels: exact
        if (bytes != want.bytes) {
          problems.push_back(absl::StrCat(set, ": ", want.name, ": INT64 values differ"));
        }
        continue;
      }
      if ((want.datatype != "FP32" && want.datatype != "FP16") ||
          bytes.size() != want.bytes.size()) {
        problems.push_back(absl::StrCat(set, ": ", want.name, ": ", bytes.size(), " bytes of ",
                                        want.datatype));
        continue;
      }
      const tf::Tolerance t = (*tol)[want.name];
      const std::vector<float> g = Floats(want.datatype, bytes);
      const std::vector<float> w = Floats(want.datatype, want.bytes);
      size_t bad = 0;
      double worst = 0;
      for (size_t k = 0; k < g.size(); ++k) {
        const double diff = std::fabs(static_cast<double>(g[k]) - w[k]);
        if (!(diff <= t.atol + t.rtol * std::fabs(w[k]))) ++bad;
        if (std::isfinite(diff)) worst = std::max(worst, diff);
      }
      if (bad > 0) {
        problems.push_back(absl::StrCat(set, ": ", want.name, ": ", bad, " of ", g.size(),
                                        " elements differ (atol ", t.atol, ", rtol ", t.rtol,
                                        ", worst abs diff ", worst, ")"));
      }
    }
  }
  return problems;
}

class TorchDaemonTest : public ::testing::TestWithParam<std::string> {
 protected:
  // One daemon serving the whole folder; it loads every model at start.
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({absl::StrCat("--model_repository=", tf::FixtureDir().string())},
                             std::chrono::seconds(300));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    stub_ = daemon_->Inference();
    absl::StatusOr<std::vector<tf::UnsupportedEntry>> list = tf::ReadUnsupportedList();
    ASSERT_TRUE(list.ok()) << list.status();
    list_ = *std::move(list);
  }

  // The daemon's RepositoryIndex row of `model`.
  inference::RepositoryIndexResponse::ModelIndex IndexRow(const std::string& model) {
    inference::RepositoryIndexResponse index;
    grpc::Status s = stub_->RepositoryIndex(Context().get(), {}, &index);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const auto& row : index.models()) {
      if (row.name() == model) return row;
    }
    ADD_FAILURE() << "RepositoryIndex does not list " << model;
    return {};
  }

  bool Ready(const std::string& model) {
    inference::ModelReadyRequest request;
    request.set_name(model);
    inference::ModelReadyResponse response;
    grpc::Status s = stub_->ModelReady(Context().get(), request, &response);
    return s.ok() && response.ready();
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<Stub> stub_;
  std::vector<tf::UnsupportedEntry> list_;
};

DaemonProcess* TorchDaemonTest::daemon_ = nullptr;

TEST_P(TorchDaemonTest, ServedWithoutConfig) {
  const std::string model = GetParam();
  const std::optional<tf::UnsupportedEntry> unsupported =
      tf::FindUnsupported(list_, model, DaemonOnCuda());

  // Ready, or not: then the daemon's index says why, and an explicit load must fail the
  // same way (the load at start already did).
  tf::Outcome outcome;
  const bool ready = Ready(model);
  if (!ready) {
    const auto row = IndexRow(model);
    EXPECT_EQ(row.state(), "UNAVAILABLE");
    inference::RepositoryModelLoadRequest load;
    load.set_model_name(model);
    inference::RepositoryModelLoadResponse loaded;
    grpc::Status s = stub_->RepositoryModelLoad(Context().get(), load, &loaded);
    outcome.load =
        s.ok() ? absl::OkStatus()
               : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    if (!s.ok()) {
      EXPECT_EQ(tf::LoadErrorProblem(row.reason(), tf::OpTypes(model)), "")
          << "RepositoryIndex reason of " << model << ": " << row.reason();
    }
  }
  if (outcome.load.ok()) outcome.mismatches = Mismatches(*stub_, model);
  const std::vector<std::string> wrong = tf::Judge(model, unsupported, outcome, tf::OpTypes(model));
  EXPECT_TRUE(wrong.empty()) << absl::StrJoin(wrong, "\n");
  if (!outcome.load.ok()) {
    // Its requests are refused, and the daemon is still up for everyone else.
    absl::StatusOr<ReferenceCase> c = ReadReferenceCaseAt(tf::CaseDirs(model).front().string());
    ASSERT_TRUE(c.ok()) << c.status();
    inference::ModelInferResponse response;
    EXPECT_FALSE(stub_->ModelInfer(Context().get(), RequestFor(model, *c), &response).ok());
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub_->ServerLive(Context().get(), {}, &live).ok());
    EXPECT_TRUE(live.live());
    return;
  }
  EXPECT_TRUE(ready) << model << " loaded only when asked again";

  // Metadata: the exporter's names and types; a dimension that differs between the input
  // sets must be reported variable (-1).
  inference::ModelMetadataRequest request;
  request.set_name(model);
  inference::ModelMetadataResponse md;
  grpc::Status s = stub_->ModelMetadata(Context().get(), request, &md);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::vector<ReferenceCase> cases;
  for (const auto& dir : tf::CaseDirs(model)) {
    absl::StatusOr<ReferenceCase> c = ReadReferenceCaseAt(dir.string());
    ASSERT_TRUE(c.ok()) << c.status();
    cases.push_back(*std::move(c));
  }
  ASSERT_FALSE(cases.empty());
  auto check = [&](const auto& got, const std::vector<CaseTensor> ReferenceCase::*member) {
    ASSERT_EQ(got.size(), (cases.front().*member).size());
    for (int i = 0; i < got.size(); ++i) {
      const CaseTensor& want = (cases.front().*member)[i];
      EXPECT_EQ(got[i].name(), want.name);
      EXPECT_EQ(got[i].datatype(), want.datatype) << want.name;
      ASSERT_EQ(got[i].shape_size(), static_cast<int>(want.shape.size())) << want.name;
      for (int d = 0; d < got[i].shape_size(); ++d) {
        for (const ReferenceCase& c : cases) {
          const int64_t dim = (c.*member)[i].shape[d];
          EXPECT_TRUE(got[i].shape(d) == -1 || got[i].shape(d) == dim)
              << want.name << " dim " << d << " is " << got[i].shape(d) << ", a case has " << dim;
        }
      }
    }
  };
  check(md.inputs(), &ReferenceCase::inputs);
  check(md.outputs(), &ReferenceCase::outputs);
  const std::vector<std::string> problems = Mismatches(*stub_, model);
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
}

INSTANTIATE_TEST_SUITE_P(Exports, TorchDaemonTest, ::testing::ValuesIn(tf::ModelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TorchDaemonTest);

TEST(TorchDaemonFixtures, ArePresent) {
  EXPECT_TRUE(std::filesystem::exists(tf::FixtureDir() / "DONE"))
      << tf::FixtureDir() << " is not complete: build the target torch_fixtures";
  EXPECT_FALSE(tf::ModelNames().empty());
}

}  // namespace
}  // namespace ndserve::testing
