#include "server/memory_map_page.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "memory/pool_stats.h"

namespace ndserve {
namespace {

using admin::v1::ManagerNode;
using admin::v1::MemorySnapshot;
using admin::v1::PoolSnapshot;
using admin::v1::SnapshotBlock;

constexpr int kWidth = 960;       // drawing width of every SVG
constexpr int kLabelWidth = 200;  // segment address and size, left of its bar
constexpr int kRowHeight = 16;
constexpr int kRowGap = 3;
constexpr int kIcicleRow = 22;

// Colour-blind-friendly categorical colours (Tableau 10), one per model in name order.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                    "#edc948", "#ff9da7", "#9c755f", "#e15759", "#2f4b7c"};
constexpr absl::string_view kCachedColour = "#d9d9d9";
constexpr absl::string_view kInactiveSplitColour = "#f4a6a6";
constexpr absl::string_view kNoModelColour = "#8c8c8c";  // held by a manager outside models
constexpr absl::string_view kUnownedColour = "#4d4d4d";  // live, no manager holds it

std::string Escape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Px(double v) { return absl::StrFormat("%.2f", v); }

class ModelColours {
 public:
  explicit ModelColours(const MemorySnapshot& snapshot) {
    for (const PoolSnapshot& pool : snapshot.pools()) {
      for (const auto& segment : pool.segments()) {
        for (const SnapshotBlock& block : segment.blocks()) {
          if (!block.model().empty()) colours_[block.model()];
        }
      }
    }
    int i = 0;
    for (auto& [model, colour] : colours_) {
      colour = kPalette[i++ % (sizeof(kPalette) / sizeof(kPalette[0]))];
    }
  }
  // Empty for a name that is not a model's.
  absl::string_view Of(const std::string& model) const {
    auto it = colours_.find(model);
    return it == colours_.end() ? absl::string_view() : absl::string_view(it->second);
  }
  const std::map<std::string, std::string>& all() const { return colours_; }

 private:
  std::map<std::string, std::string> colours_;
};

absl::string_view BlockColour(const SnapshotBlock& block, const ModelColours& colours) {
  if (block.state() == "cached") return kCachedColour;
  if (block.state() == "inactive_split") return kInactiveSplitColour;
  if (!block.model().empty()) return colours.Of(block.model());
  return block.owner().empty() ? kUnownedColour : kNoModelColour;
}

std::string BlockTitle(const SnapshotBlock& block, std::uint64_t segment_address) {
  std::string title = absl::StrFormat("%#x (+%d) %s, %s", segment_address + block.offset(),
                                      block.offset(), FormatBytes(block.bytes()), block.state());
  if (!block.owner().empty()) {
    absl::StrAppend(&title, "\nowner: ", block.owner(), " (uid ", block.owner_uid(), ")");
    if (!block.array().empty()) absl::StrAppend(&title, "\narray: ", block.array());
    absl::StrAppend(&title, "\nrequested: ", FormatBytes(block.requested_bytes()));
  } else if (block.state() == "allocated") {
    absl::StrAppend(&title, "\nowner: none (allocated on the pool directly)");
  }
  absl::StrAppend(&title, "\nstream ", block.stream());
  return title;
}

void AppendPool(const PoolSnapshot& pool, const ModelColours& colours, std::string* out) {
  const auto& st = pool.status();
  int blocks = 0;
  std::uint64_t largest = 1;
  for (const auto& segment : pool.segments()) {
    blocks += segment.blocks_size();
    largest = std::max<std::uint64_t>(largest, segment.bytes());
  }
  absl::StrAppend(out, "<section class=\"pool\"><h2>", Escape(st.device()), " &middot; ",
                  Escape(st.pool()), " pool</h2>\n");
  absl::StrAppend(
      out, "<p class=\"totals\">", FormatBytes(st.allocated_bytes()), " allocated &middot; ",
      FormatBytes(st.cached_bytes()), " cached (", FormatBytes(st.inactive_split_bytes()),
      " inactive split) &middot; ", FormatBytes(st.reserved_bytes()), " reserved &middot; limit ",
      st.limit_bytes() == 0 ? std::string("none") : FormatBytes(st.limit_bytes()),
      " &middot; peak ", FormatBytes(st.peak_allocated_bytes()), " &middot; ",
      pool.segments_size(), " segments, ", blocks, " blocks</p>\n");
  const int height = std::max(1, pool.segments_size()) * (kRowHeight + kRowGap);
  absl::StrAppend(out, "<svg class=\"segments\" xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                  kWidth, "\" height=\"", height, "\" data-device=\"", Escape(st.device()),
                  "\" data-blocks=\"", blocks, "\">\n");
  const double bar_width = kWidth - kLabelWidth;
  int row = 0;
  for (const auto& segment : pool.segments()) {
    const double y = row++ * (kRowHeight + kRowGap);
    // Linear in bytes against the pool's largest segment, at least 2 px so that a small
    // segment stays visible.
    const double width =
        std::max(2.0, bar_width * static_cast<double>(segment.bytes()) / static_cast<double>(largest));
    absl::StrAppend(out, "<g class=\"segment\"><text x=\"0\" y=\"", Px(y + kRowHeight - 4),
                    "\">", absl::StrFormat("%#x", segment.address()), " ",
                    FormatBytes(segment.bytes()), "</text>\n");
    const double scale = width / static_cast<double>(std::max<std::uint64_t>(1, segment.bytes()));
    for (const SnapshotBlock& block : segment.blocks()) {
      const double x = kLabelWidth + block.offset() * scale;
      const double w = std::max(1.0, block.bytes() * scale);
      absl::StrAppend(out, "<rect class=\"block\" x=\"", Px(x), "\" y=\"", Px(y), "\" width=\"",
                      Px(w), "\" height=\"", kRowHeight, "\" fill=\"",
                      BlockColour(block, colours), "\" data-state=\"", Escape(block.state()),
                      "\" data-model=\"", Escape(block.model()), "\"><title>",
                      Escape(BlockTitle(block, segment.address())), "</title></rect>\n");
    }
    absl::StrAppend(out, "<rect class=\"outline\" x=\"", kLabelWidth, "\" y=\"", Px(y),
                    "\" width=\"", Px(width), "\" height=\"", kRowHeight, "\"/></g>\n");
  }
  absl::StrAppend(out, "</svg></section>\n");
}

std::uint64_t SubtreeBytes(const ManagerNode& node) {
  std::uint64_t sum = node.block_bytes();
  for (const ManagerNode& child : node.children()) sum += SubtreeBytes(child);
  return sum;
}

int Depth(const ManagerNode& node) {
  int depth = 0;
  for (const ManagerNode& child : node.children()) depth = std::max(depth, Depth(child));
  return depth + 1;
}

void AppendIcicleNode(const ManagerNode& node, double x, double width, int depth,
                      absl::string_view inherited, const ModelColours& colours,
                      std::string* out) {
  const std::uint64_t total = SubtreeBytes(node);
  absl::string_view colour = colours.Of(node.name());
  if (colour.empty()) colour = inherited;
  const double y = depth * kIcicleRow;
  absl::StrAppend(out, "<g class=\"manager\"><rect x=\"", Px(x), "\" y=\"", y, "\" width=\"",
                  Px(std::max(0.5, width)), "\" height=\"", kIcicleRow - 2, "\" fill=\"",
                  colour.empty() ? kNoModelColour : colour, "\"><title>",
                  Escape(absl::StrCat(node.name(), " (uid ", node.uid(), ")\n",
                                      FormatBytes(total), " in the subtree, ",
                                      FormatBytes(node.block_bytes()), " in ",
                                      node.resource_count(), " arrays of its own")),
                  "</title></rect>");
  if (width > 90) {
    // Clipped to the node by a nested SVG viewport, so a long name never spills over.
    absl::StrAppend(out, "<svg x=\"", Px(x), "\" y=\"", y, "\" width=\"", Px(width),
                    "\" height=\"", kIcicleRow - 2, "\"><text x=\"4\" y=\"", kIcicleRow - 7,
                    "\">", Escape(node.name()), " ", FormatBytes(total), "</text></svg>");
  }
  absl::StrAppend(out, "</g>\n");
  if (total == 0) return;
  double child_x = x;
  for (const ManagerNode& child : node.children()) {
    const std::uint64_t bytes = SubtreeBytes(child);
    if (bytes == 0) continue;  // nothing to draw: empty scopes take no width
    const double w = width * static_cast<double>(bytes) / static_cast<double>(total);
    AppendIcicleNode(child, child_x, w, depth + 1, colour, colours, out);
    child_x += w;
  }
}

void AppendIcicle(const ManagerNode& root, const ModelColours& colours, std::string* out) {
  absl::StrAppend(out, "<section class=\"managers\"><h2>Manager tree</h2>\n",
                  "<p class=\"totals\">", FormatBytes(SubtreeBytes(root)),
                  " held by arrays, as the pools rounded them; width is bytes</p>\n");
  absl::StrAppend(out, "<svg class=\"icicle\" xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                  kWidth, "\" height=\"", Depth(root) * kIcicleRow, "\">\n");
  AppendIcicleNode(root, 0, kWidth, 0, {}, colours, out);
  absl::StrAppend(out, "</svg></section>\n");
}

void AppendLegend(const MemorySnapshot& snapshot, const ModelColours& colours, std::string* out) {
  std::map<std::string, std::uint64_t> per_model;
  for (const PoolSnapshot& pool : snapshot.pools()) {
    for (const auto& segment : pool.segments()) {
      for (const SnapshotBlock& block : segment.blocks()) {
        if (!block.model().empty()) per_model[block.model()] += block.bytes();
      }
    }
  }
  absl::StrAppend(out, "<ul class=\"legend\">\n");
  auto item = [out](absl::string_view colour, absl::string_view label) {
    absl::StrAppend(out, "<li><span class=\"swatch\" style=\"background:", colour, "\"></span>",
                    label, "</li>\n");
  };
  for (const auto& [model, colour] : colours.all()) {
    item(colour, absl::StrCat(Escape(model), " (", FormatBytes(per_model[model]), ")"));
  }
  item(kNoModelColour, "held outside any model");
  item(kUnownedColour, "allocated, no manager");
  item(kCachedColour, "cached");
  item(kInactiveSplitColour, "inactive split");
  absl::StrAppend(out, "</ul>\n");
}

}  // namespace

std::string RenderMemoryMapPage(const MemorySnapshot& snapshot) {
  const ModelColours colours(snapshot);
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>ndserve memory map</title>\n<style>\n"
      "body{font-family:sans-serif;font-size:13px;margin:16px;color:#222}\n"
      "h1{font-size:18px}h2{font-size:15px;margin:18px 0 4px}\n"
      "svg text{font-family:monospace;font-size:11px;fill:#222}\n"
      "rect.outline{fill:none;stroke:#333;stroke-width:0.5}\n"
      "g.manager rect{stroke:#fff;stroke-width:0.5}\n"
      ".legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:12px}\n"
      ".swatch{display:inline-block;width:12px;height:12px;margin-right:4px;"
      "vertical-align:middle;border:1px solid #999}\n"
      ".totals{margin:2px 0 6px}\n"
      "</style></head><body>\n<h1>ndserve memory map</h1>\n";
  AppendLegend(snapshot, colours, &out);
  for (const PoolSnapshot& pool : snapshot.pools()) AppendPool(pool, colours, &out);
  AppendIcicle(snapshot.root(), colours, &out);
  absl::StrAppend(&out, "</body></html>\n");
  return out;
}

}  // namespace ndserve
