#ifndef NDSERVE_TESTS_TORCH_TORCH_FIXTURES_H_
#define NDSERVE_TESTS_TORCH_TORCH_FIXTURES_H_

// The PyTorch-exported fixtures (tools/gen_torch_models.py) as the engine and daemon tests
// see them: where the generated folder is, its models and input sets, the per-output
// tolerances of a case, and the list of models the engine is known not to load yet
// (tests/fixtures/torch_unsupported.txt).
//
// Header-only and free of engine types, so the engine test and the daemon test (which sit
// on different layers) share it; case.txt itself is read by tests/fixture_case.h. Plain
// functions of files; thread-compatible.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tests/fixture_case.h"

namespace ndserve::torch_fixtures {

namespace fs = std::filesystem;

// The generated folder: $NDSERVE_TORCH_FIXTURES, else the one this build was configured
// with (compile definition of the same name, set by tests/torch/CMakeLists.txt).
inline fs::path FixtureDir() {
  if (const char* env = std::getenv("NDSERVE_TORCH_FIXTURES"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef NDSERVE_TORCH_FIXTURES
  return NDSERVE_TORCH_FIXTURES;
#else
  return {};
#endif
}

// The repository root, where tests/fixtures/torch_unsupported.txt lives: $NDSERVE_SOURCE_DIR,
// else the one this build was configured from.
inline fs::path SourceRoot() {
  if (const char* env = std::getenv("NDSERVE_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef NDSERVE_SOURCE_ROOT
  return NDSERVE_SOURCE_ROOT;
#else
  return fs::current_path();
#endif
}

inline fs::path UnsupportedListPath() {
  return SourceRoot() / "tests/fixtures/torch_unsupported.txt";
}

inline std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The models of the generated folder (every subfolder with 1/model.onnx), sorted. Empty
// when the folder was not generated; FixturesArePresent says why.
inline std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(FixtureDir(), ec)) {
    if (fs::exists(entry.path() / "1/model.onnx", ec)) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// <fixtures>/<model>/cases/<set> folders, sorted by set name.
inline std::vector<fs::path> CaseDirs(const std::string& model) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(FixtureDir() / model / "cases", ec)) {
    if (fs::exists(entry.path() / "case.txt", ec)) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// The operator types of a model's export (<model>/ops.txt: '<OpType> <count>' lines).
inline std::vector<std::string> OpTypes(const std::string& model) {
  std::vector<std::string> ops;
  for (absl::string_view line : absl::StrSplit(ReadText(FixtureDir() / model / "ops.txt"), '\n')) {
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!w.empty()) ops.push_back(w[0]);
  }
  return ops;
}

using Tolerance = fixtures::FixtureTolerance;

// Per output name, from the case's 'output_tolerance <name> <atol> <rtol>' lines.
inline absl::StatusOr<std::map<std::string, Tolerance>> OutputTolerances(const fs::path& case_dir) {
  absl::StatusOr<fixtures::FixtureCase> c = fixtures::ReadFixtureCase(case_dir);
  if (!c.ok()) return c.status();
  if (c->output_tolerances.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(case_dir.string(), "/case.txt has no output_tolerance lines"));
  }
  return c->output_tolerances;
}

// One line of tests/fixtures/torch_unsupported.txt: '<model>[@cuda] <reason>'. A plain
// model name holds on every device; '@cuda' only on CUDA devices (CPU must load it).
struct UnsupportedEntry {
  std::string model;
  bool cuda_only = false;
  std::string reason;
};

inline absl::StatusOr<std::vector<UnsupportedEntry>> ReadUnsupportedList() {
  const fs::path path = UnsupportedListPath();
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat("missing ", path.string()));
  std::vector<UnsupportedEntry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(ReadText(path), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find(' ');
    UnsupportedEntry e;
    absl::string_view model = line.substr(0, space);
    e.cuda_only = absl::ConsumeSuffix(&model, "@cuda");
    e.model = std::string(model);
    if (space != absl::string_view::npos) {
      e.reason = std::string(absl::StripAsciiWhitespace(line.substr(space)));
    }
    if (e.reason.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ":", line_number, ": '",
                                                     e.model, "' needs a reason after the name"));
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

// The entry that keeps `model` from loading on a device of that kind, if any.
inline std::optional<UnsupportedEntry> FindUnsupported(const std::vector<UnsupportedEntry>& list,
                                                       const std::string& model, bool cuda) {
  for (const UnsupportedEntry& e : list) {
    if (e.model == model && (cuda || !e.cuda_only)) return e;
  }
  return std::nullopt;
}

// What a load failure of a listed model must say: which node, and its op type (one of
// `op_types`, the model's) or the opset. Empty when it does; otherwise what is missing.
inline std::string LoadErrorProblem(absl::string_view message,
                                    const std::vector<std::string>& op_types) {
  if (!absl::StrContains(message, "node '")) return "it names no node (\"node '...'\")";
  if (absl::StrContains(message, "opset")) return "";
  for (const std::string& op : op_types) {
    if (absl::StrContains(message, absl::StrCat("(", op, ")")) ||
        absl::StrContains(message, absl::StrCat("'", op, "'"))) {
      return "";
    }
  }
  return "it names neither the opset nor an operator type of the model";
}

// Loading (and, when that worked, running) one model on one device.
struct Outcome {
  absl::Status load;
  std::vector<std::string> mismatches;  // one line per input set or output that differs
};

// The one rule both tests (engine and daemon) apply; what is wrong, empty when nothing.
// A listed model must fail to load with UNIMPLEMENTED or INVALID_ARGUMENT whose message
// names the node and its op or the opset; an unlisted one must load and match; a listed
// one that loads and matches must be taken off the list.
inline std::vector<std::string> Judge(const std::string& model,
                                      const std::optional<UnsupportedEntry>& listed,
                                      const Outcome& outcome,
                                      const std::vector<std::string>& op_types) {
  const std::string list = UnsupportedListPath().string();
  std::vector<std::string> wrong;
  if (listed.has_value()) {
    if (outcome.load.ok() && outcome.mismatches.empty()) {
      wrong.push_back(
          absl::StrCat(model, " now loads and matches PyTorch: remove ", model, " from ", list));
    } else if (outcome.load.ok()) {
      wrong.push_back(absl::StrCat(model, " (listed as unsupported: ", listed->reason,
                                   ") loads but does not match PyTorch:"));
      wrong.insert(wrong.end(), outcome.mismatches.begin(), outcome.mismatches.end());
    } else {
      const absl::StatusCode code = outcome.load.code();
      if (code != absl::StatusCode::kUnimplemented && code != absl::StatusCode::kInvalidArgument) {
        wrong.push_back(absl::StrCat(model, ": the load error must be UNIMPLEMENTED or ",
                                     "INVALID_ARGUMENT, not ", outcome.load.ToString()));
      }
      if (std::string problem = LoadErrorProblem(outcome.load.message(), op_types);
          !problem.empty()) {
        wrong.push_back(absl::StrCat(model, ": the load error must say which node and op, but ",
                                     problem, ": ", outcome.load.ToString()));
      }
    }
    return wrong;
  }
  if (!outcome.load.ok()) {
    wrong.push_back(absl::StrCat(model, " does not load: ", outcome.load.ToString(),
                                 " (if it cannot load yet, list it in ", list,
                                 " with the reason)"));
    return wrong;
  }
  wrong.insert(wrong.end(), outcome.mismatches.begin(), outcome.mismatches.end());
  return wrong;
}

}  // namespace ndserve::torch_fixtures

#endif  // NDSERVE_TESTS_TORCH_TORCH_FIXTURES_H_
