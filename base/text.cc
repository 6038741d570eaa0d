#include "base/text.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace ndserve {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr size_t kClipNameBytes = 64;

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0 when the first byte
// does not start one (RFC 3629's table: the second byte's range excludes overlong forms,
// surrogates and code points past U+10FFFF).
size_t SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const uint8_t b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (b0 == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
  if (b0 == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xF1 && b0 <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

}  // namespace

bool IsValidUtf8(absl::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = SequenceLength(text.substr(pos));
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string SafeUtf8(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 1);
  size_t pos = 0;
  // Stops one byte past the limit: enough to know the text must be cut.
  while (pos < text.size() && out.size() <= max_bytes) {
    const size_t n = SequenceLength(text.substr(pos));
    if (n == 0) {
      out += kReplacement;
      ++pos;
    } else {
      out.append(text.data() + pos, n);
      pos += n;
    }
  }
  if (pos == text.size() && out.size() <= max_bytes) return out;
  const std::string marker = absl::StrCat("...(", text.size(), " bytes)");
  size_t cut = max_bytes > marker.size() ? max_bytes - marker.size() : 0;
  // Back up to a character boundary: `out` is valid UTF-8, so continuation bytes
  // (10xxxxxx) never start a character.
  while (cut > 0 && (static_cast<uint8_t>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  out += marker;
  return out;
}

std::string ClipName(absl::string_view name) { return SafeUtf8(name, kClipNameBytes); }

absl::Status CheckName(absl::string_view what, absl::string_view name) {
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", ClipName(name), "' is ", name.size(),
                                                   " bytes long; at most ", kMaxNameBytes,
                                                   " are allowed"));
  }
  if (!IsValidUtf8(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", ClipName(name), "' is not valid UTF-8"));
  }
  return absl::OkStatus();
}

}  // namespace ndserve
