#ifndef NDSERVE_SERVER_MEMORY_MAP_PAGE_H_
#define NDSERVE_SERVER_MEMORY_MAP_PAGE_H_

#include <string>

#include "proto/admin.pb.h"

namespace ndserve {

// The memory map (docs/design.md §3, "Memory map"): one self-contained HTML page with
// inline SVG and CSS (no scripts, no external fonts or files) that draws
//  - per pool, its totals and each segment as a bar, the blocks in it coloured by owning
//    model (allocated) or state (cached, inactive split); one <rect class="block"> per
//    block, with a <title> naming offset, size, state, owner and array;
//  - the NDManager trees as an icicle whose widths are each subtree's rounded bytes.
// Served at http://<metrics_address>/memory and written by `ndserve-cli memory-map`;
// both render the admin GetMemorySnapshot message, so they draw the same thing.
// The root <svg> elements carry data-blocks (the pool's block count) for tests.
std::string RenderMemoryMapPage(const ndserve::admin::v1::MemorySnapshot& snapshot);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_MEMORY_MAP_PAGE_H_
