#include "engine/cuda_graph_cache.h"

#include <algorithm>

namespace ndserve::engine {

CudaGraphCache::CudaGraphCache(Options options, Deleter deleter)
    : options_{std::max(options.capture_after, 1), std::max(options.max_graphs, 1),
               std::max(options.max_tracked_keys, 1)},
      deleter_(std::move(deleter)) {}

CudaGraphCache::~CudaGraphCache() { Clear(); }

CudaGraphCache::Decision CudaGraphCache::Decide(const CudaGraphKey& key) {
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    ++stats_.replays;
    return {Action::kReplay, it->second->second};
  }
  auto it = sightings_.find(key);
  if (it == sightings_.end()) {
    if (static_cast<int>(sightings_.size()) >= options_.max_tracked_keys) sightings_.clear();
    it = sightings_.emplace(key, 0).first;
  }
  if (it->second == kNever) return {};
  ++it->second;
  if (it->second >= options_.capture_after) return {Action::kCapture, nullptr};
  return {};
}

void CudaGraphCache::Insert(const CudaGraphKey& key, Handle graph) {
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    // Captured twice (a caller that did not ask Decide first): keep the newer graph.
    deleter_(it->second->second);
    it->second->second = graph;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  sightings_.erase(key);
  ++stats_.captures;
  lru_.emplace_front(key, graph);
  graphs_[key] = lru_.begin();
  while (static_cast<int>(lru_.size()) > options_.max_graphs) {
    Entry& victim = lru_.back();
    deleter_(victim.second);
    graphs_.erase(victim.first);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

void CudaGraphCache::CaptureFailed(const CudaGraphKey& key) {
  ++stats_.failed_captures;
  sightings_[key] = kNever;
}

void CudaGraphCache::Clear() {
  for (Entry& e : lru_) deleter_(e.second);
  lru_.clear();
  graphs_.clear();
  sightings_.clear();
}

}  // namespace ndserve::engine
