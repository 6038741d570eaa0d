#include "tests/fixture_case.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <system_error>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace ndserve::fixtures {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::vector<std::uint8_t>> ReadBytes(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), {});
}

template <typename T>
bool ParseNumber(absl::string_view text, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    return absl::SimpleAtof(text, out);
  } else if constexpr (std::is_same_v<T, double>) {
    return absl::SimpleAtod(text, out);
  } else {
    return absl::SimpleAtoi(text, out);
  }
}

// "1,2,3" as a list of T.
template <typename T>
bool ParseList(absl::string_view text, std::vector<T>* out) {
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    T v;
    if (!ParseNumber(item, &v)) return false;
    out->push_back(v);
  }
  return true;
}

absl::StatusOr<FixtureAttr> ParseAttr(absl::string_view type, absl::string_view value) {
  if (type == "int") {
    std::int64_t v;
    if (ParseNumber(value, &v)) return FixtureAttr(v);
  } else if (type == "float") {
    float v;
    if (ParseNumber(value, &v)) return FixtureAttr(v);
  } else if (type == "ints") {
    std::vector<std::int64_t> v;
    if (ParseList(value, &v)) return FixtureAttr(std::move(v));
  } else if (type == "floats") {
    std::vector<float> v;
    if (ParseList(value, &v)) return FixtureAttr(std::move(v));
  } else if (type == "string") {
    return FixtureAttr(std::string(value));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown attr type '", type, "'"));
  }
  return absl::InvalidArgumentError(absl::StrCat("bad ", type, " value '", value, "'"));
}

// "attr <name> tensor FP32 [1] 0.5": the element type decides ints or reals.
absl::StatusOr<FixtureAttr> ParseTensorAttr(absl::string_view dtype, absl::string_view dims,
                                            absl::string_view values) {
  FixtureTensorAttr t;
  NDS_ASSIGN_OR_RETURN(t.dtype, ParseDType(dtype));
  NDS_ASSIGN_OR_RETURN(t.dims, ParseFixtureDims(dims));
  const bool real = t.dtype == DType::kFp16 || t.dtype == DType::kBf16 ||
                    t.dtype == DType::kFp32 || t.dtype == DType::kFp64;
  const bool ok = real ? ParseList(values, &t.reals) : ParseList(values, &t.ints);
  std::int64_t n = 1;
  for (std::int64_t d : t.dims) n *= d;
  const std::size_t got = real ? t.reals.size() : t.ints.size();
  if (!ok || got != static_cast<std::size_t>(n)) {
    return absl::InvalidArgumentError(absl::StrCat("bad tensor attr values '", values, "'"));
  }
  return FixtureAttr(std::move(t));
}

absl::StatusOr<FixtureTensor> ReadTensor(const fs::path& dir, const std::vector<std::string>& w) {
  FixtureTensor t;
  t.kind = w[0];
  t.name = w[1];
  NDS_ASSIGN_OR_RETURN(t.dtype, ParseDType(w[2]));
  NDS_ASSIGN_OR_RETURN(t.dims, ParseFixtureDims(w[3]));
  NDS_ASSIGN_OR_RETURN(t.bytes, ReadBytes(dir / w[4]));
  const std::uint64_t want = static_cast<std::uint64_t>(t.numel()) * DTypeSize(t.dtype);
  if (t.bytes.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(w[4], " has ", t.bytes.size(), " bytes, expected ", want));
  }
  return t;
}

// One directive into `c`.
absl::Status ReadLine(const fs::path& dir, const std::vector<std::string>& w, FixtureCase* c) {
  const std::string& kw = w[0];
  if (kw == "model" && w.size() == 2) {
    c->model = dir / w[1];
  } else if (kw == "op" && w.size() == 2) {
    c->op = w[1];
  } else if (kw == "opset" && w.size() == 2) {
    if (!absl::SimpleAtoi(w[1], &c->opset)) return absl::InvalidArgumentError("bad opset");
  } else if (kw == "tolerance" && w.size() == 3) {
    if (!absl::SimpleAtod(w[1], &c->atol) || !absl::SimpleAtod(w[2], &c->rtol)) {
      return absl::InvalidArgumentError("bad tolerance");
    }
  } else if (kw == "output_tolerance" && w.size() == 4) {
    FixtureTolerance t;
    if (!absl::SimpleAtod(w[2], &t.atol) || !absl::SimpleAtod(w[3], &t.rtol)) {
      return absl::InvalidArgumentError("bad tolerance");
    }
    c->output_tolerances[w[1]] = t;
  } else if (kw == "attr" && w.size() == 4) {
    NDS_ASSIGN_OR_RETURN(FixtureAttr attr, ParseAttr(w[2], w[3]));
    c->attrs.emplace_back(w[1], std::move(attr));
  } else if (kw == "attr" && w.size() == 6 && w[2] == "tensor") {
    NDS_ASSIGN_OR_RETURN(FixtureAttr attr, ParseTensorAttr(w[3], w[4], w[5]));
    c->attrs.emplace_back(w[1], std::move(attr));
  } else if ((kw == "input" || kw == "const" || kw == "output") && w.size() == 5) {
    NDS_ASSIGN_OR_RETURN(FixtureTensor t, ReadTensor(dir, w));
    (kw == "output" ? c->outputs : c->inputs).push_back(std::move(t));
  } else {
    return absl::InvalidArgumentError("unknown directive");
  }
  return absl::OkStatus();
}

}  // namespace

fs::path SourceDir() {
  if (const char* env = std::getenv("NDSERVE_SOURCE_DIR")) return env;
  std::error_code ec;
  for (fs::path start : {fs::read_symlink("/proc/self/exe", ec), fs::current_path(ec)}) {
    for (fs::path p = start; !p.empty() && p != p.root_path(); p = p.parent_path()) {
      if (fs::exists(p / "tests/fixtures", ec)) return p;
    }
  }
  return {};
}

std::int64_t FixtureTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

std::vector<const FixtureTensor*> FixtureCase::GraphInputs() const {
  std::vector<const FixtureTensor*> out;
  for (const FixtureTensor& t : inputs) {
    if (t.kind == "input") out.push_back(&t);
  }
  return out;
}

absl::StatusOr<std::vector<std::int64_t>> ParseFixtureDims(absl::string_view text) {
  absl::string_view inner = text;
  if (!absl::ConsumePrefix(&inner, "[") || !absl::ConsumeSuffix(&inner, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("bad dims '", text, "'"));
  }
  std::vector<std::int64_t> dims;
  if (inner.empty()) return dims;
  if (!ParseList(inner, &dims)) {
    return absl::InvalidArgumentError(absl::StrCat("bad dims '", text, "'"));
  }
  return dims;
}

absl::StatusOr<FixtureCase> ReadFixtureCase(const fs::path& dir) {
  std::ifstream f(dir / "case.txt");
  if (!f) return absl::NotFoundError(absl::StrCat("no case.txt in ", dir.string()));
  FixtureCase c;
  c.dir = dir;
  c.name = dir.filename().string();
  std::string line;
  while (std::getline(f, line)) {
    const absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    const std::vector<std::string> words = absl::StrSplit(text, ' ', absl::SkipEmpty());
    if (absl::Status s = ReadLine(dir, words, &c); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat((dir / "case.txt").string(), ": '", text, "': ", s.message()));
    }
  }
  return c;
}

std::vector<std::string> FixtureCaseNames(const fs::path& root) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (fs::exists(entry.path() / "case.txt", ec)) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace ndserve::fixtures
