// ndserve's engine on model files and inputs that ONNX Runtime also runs
// (benchmarks/ort/ort_bench.js): the two halves of scripts/models-bench.sh.
//
//   models_benchmark --row=<repo>/<model>,<case dir>,<batch> [--row=...] [benchmark flags]
//
// Each row loads <repo>/<model> as the daemon would (its config.pbtxt if it has one, else
// the ONNX file alone; max_batch_size raised to the batch) on the CPU, or on
// $NDSERVE_BENCH_DEVICE, and times ServedModel::Infer on the case's inputs (case.txt
// grammar, tools/gen_models.py) with `batch` rows: the case's rows repeated in order, or
// its first rows, exactly as ort_bench.js --batch builds them. Reports rows/s. A model
// the engine cannot load is reported as an error row carrying the load error, so the
// script can say so instead of a number.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/logging.h"
#include "benchmark/benchmark.h"
#include "engine/repository.h"
#include "engine/run_profile.h"
#include "engine/served_model.h"
#include "memory/memory_system.h"

namespace ndserve::engine {
namespace {

namespace fs = std::filesystem;

Device BenchDevice() {
  const char* env = std::getenv("NDSERVE_BENCH_DEVICE");
  if (env == nullptr) return Device::Cpu();
  absl::StatusOr<Device> device = ParseDevice(env);
  return device.ok() ? *device : Device::Cpu();
}

// The benchmark's own memory system (default config), never destroyed: the models stay
// loaded for the whole run.
MemorySystem* BenchMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The inputs of a case, resized to `batch` rows along dimension 0. Owns the bytes the
// request's views point at; not copyable for that reason.
struct CaseInputs {
  CaseInputs() = default;
  CaseInputs(const CaseInputs&) = delete;
  CaseInputs& operator=(const CaseInputs&) = delete;

  std::vector<std::unique_ptr<std::string>> buffers;
  InferenceRequest request;
};

absl::Status ReadInputs(const fs::path& dir, int64_t batch, CaseInputs* out) {
  absl::StatusOr<std::string> text = ReadFile(dir / "case.txt");
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (w.size() != 5 || w[0] != "input") continue;
    absl::StatusOr<DType> dtype = ParseDType(w[2]);
    if (!dtype.ok()) return dtype.status();
    std::vector<int64_t> dims;
    absl::string_view d = w[3];
    absl::ConsumePrefix(&d, "[");
    absl::ConsumeSuffix(&d, "]");
    for (absl::string_view v : absl::StrSplit(d, ',', absl::SkipEmpty())) {
      int64_t x;
      if (!absl::SimpleAtoi(v, &x)) return absl::InvalidArgumentError(absl::StrCat("dims ", w[3]));
      dims.push_back(x);
    }
    absl::StatusOr<std::string> bytes = ReadFile(dir / w[4]);
    if (!bytes.ok()) return bytes.status();
    if (dims.empty() || dims[0] <= 0 || bytes->size() % dims[0] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(w[1], ": no batch dimension"));
    }
    const size_t row = bytes->size() / dims[0];
    auto data = std::make_unique<std::string>();
    data->reserve(row * batch);
    for (int64_t r = 0; r < batch; ++r) data->append(*bytes, (r % dims[0]) * row, row);
    dims[0] = batch;
    out->request.inputs.push_back(
        {w[1], *dtype, dims,
         absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(data->data()), data->size())});
    out->buffers.push_back(std::move(data));
  }
  if (out->request.inputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir.string(), "/case.txt has no inputs"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ServedModel>> LoadModel(const fs::path& model_dir, int64_t batch) {
  ModelRepository repo(model_dir.parent_path().string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel(model_dir.filename().string());
  if (!m.ok()) return m.status();
  absl::StatusOr<ModelVersionLocation> version = ModelRepository::ResolveVersion(*m, 0);
  if (!version.ok()) return version.status();
  ModelLoadSpec spec;
  spec.name = model_dir.filename().string();
  spec.model_path = version->model_path;
  spec.config = m->config;
  if (spec.config.has_value() && spec.config->max_batch_size > 0 &&
      spec.config->max_batch_size < batch) {
    spec.config->max_batch_size = static_cast<int>(batch);
  }
  spec.device = BenchDevice();
  return ServedModel::Load(spec, BenchMemory());
}

struct Row {
  fs::path model_dir;
  fs::path case_dir;
  int64_t batch = 0;
};

void BM_Model(benchmark::State& state, const Row& row) {
  absl::StatusOr<std::shared_ptr<ServedModel>> model = LoadModel(row.model_dir, row.batch);
  if (!model.ok()) {
    return state.SkipWithError(absl::StrCat("cannot load: ", model.status().message()).c_str());
  }
  CaseInputs inputs;
  if (absl::Status s = ReadInputs(row.case_dir, row.batch, &inputs); !s.ok()) {
    return state.SkipWithError(std::string(s.message()).c_str());
  }
  inputs.request.model_name = (*model)->name();
  for (auto _ : state) {
    absl::StatusOr<InferenceResponse> r = (*model)->Infer(inputs.request);
    if (!r.ok()) return state.SkipWithError(std::string(r.status().message()).c_str());
    benchmark::DoNotOptimize(r->outputs[0].data.data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations() * row.batch),
                                                benchmark::Counter::kIsRate);
}

// Per-node profile of `runs` requests of the row (after as many warm-up ones), printed
// to stdout. Returns false when the row cannot run.
bool ProfileRow(const Row& row, int runs, int top) {
  absl::StatusOr<std::shared_ptr<ServedModel>> model = LoadModel(row.model_dir, row.batch);
  CaseInputs inputs;
  absl::Status status = model.status();
  if (status.ok()) status = ReadInputs(row.case_dir, row.batch, &inputs);
  if (status.ok()) inputs.request.model_name = (*model)->name();
  RunProfile profile;
  for (int pass = 0; pass < 2 && status.ok(); ++pass) {
    if (pass == 1) SetActiveRunProfile(&profile);
    for (int i = 0; i < runs && status.ok(); ++i) status = (*model)->Infer(inputs.request).status();
  }
  SetActiveRunProfile(nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "%s b%lld: %s\n", row.model_dir.filename().c_str(),
                 static_cast<long long>(row.batch), std::string(status.message()).c_str());
    return false;
  }
  std::printf("## %s b%lld\n\n%s\n", row.model_dir.filename().c_str(),
              static_cast<long long>(row.batch), profile.Report(top).c_str());
  return true;
}

}  // namespace
}  // namespace ndserve::engine

int main(int argc, char** argv) {
  ndserve::logging::SetMinSeverity(ndserve::logging::Severity::kWarning);
  std::vector<char*> rest;
  std::vector<ndserve::engine::Row> all_rows;
  int rows = 0, profile_runs = 0, profile_nodes = 25;
  for (int i = 0; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--profile=")) {
      if (!absl::SimpleAtoi(arg, &profile_runs) || profile_runs <= 0) {
        std::fprintf(stderr, "bad --profile=%s: want a number of runs\n", std::string(arg).c_str());
        return 2;
      }
      continue;
    }
    if (absl::ConsumePrefix(&arg, "--profile_nodes=")) {
      if (!absl::SimpleAtoi(arg, &profile_nodes) || profile_nodes < 0) {
        std::fprintf(stderr, "bad --profile_nodes=%s\n", std::string(arg).c_str());
        return 2;
      }
      continue;
    }
    if (!absl::ConsumePrefix(&arg, "--row=")) {
      rest.push_back(argv[i]);
      continue;
    }
    std::vector<std::string> f = absl::StrSplit(arg, ',');
    ndserve::engine::Row row;
    if (f.size() != 3 || !absl::SimpleAtoi(f[2], &row.batch) || row.batch <= 0) {
      std::fprintf(stderr, "bad --row=%s: want <repo>/<model>,<case dir>,<batch>\n",
                   std::string(arg).c_str());
      return 2;
    }
    row.model_dir = f[0];
    row.case_dir = f[1];
    all_rows.push_back(row);
    benchmark::RegisterBenchmark(
        absl::StrCat(row.model_dir.filename().string(), "/b", row.batch).c_str(),
        ndserve::engine::BM_Model, row)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    ++rows;
  }
  if (rows == 0) {
    std::fprintf(stderr,
                 "usage: %s [--profile=<runs> [--profile_nodes=N]] "
                 "--row=<repo>/<model>,<case dir>,<batch> ... [flags]\n",
                 argv[0]);
    return 2;
  }
  if (profile_runs > 0) {
    bool ok = true;
    for (const ndserve::engine::Row& row : all_rows) {
      ok = ndserve::engine::ProfileRow(row, profile_runs, profile_nodes) && ok;
    }
    return ok ? 0 : 1;
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
