// Format version 3's `paged` state field, checked against the state's runs.
#include "core/capture/capture_paged.h"

#include <algorithm>

#include "core/capture/capture_limits.h"
#include "core/error.h"
#include "core/model/json_fields.h"

namespace kvscope::capture_paged {

namespace {

using Json = nlohmann::json;

const Json& field(const std::string& path, const std::string& what, const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end()) fail(path, what + " has no field '" + key + "'");
  return *it;
}

void requireList(const std::string& path, const std::string& what, const Json& value, size_t count,
                 const std::string& of) {
  if (!value.is_array() || value.size() != count)
    fail(path, what + " must be a list of " + std::to_string(count) + " " + of + ", got " + jsonSnippet(value));
}

// Runs [first, count] with first in {-2} or [0, pool_slots - 1] and
// first + count within the pool; at most `limit` slots in all.
// `unit` names what the numbers count ("pool slot", "block").
std::vector<CaptureSlotRun> poolRuns(const std::string& path, const std::string& what, const Json& runs,
                                     int64_t pool_slots, int64_t limit, bool allow_padding, const std::string& unit) {
  if (!runs.is_array()) fail(path, what + " must be a list of runs [first, count], got " + jsonSnippet(runs));
  if (static_cast<int64_t>(runs.size()) > limit)
    fail(path, what + " has " + std::to_string(runs.size()) + " runs, more than its " + std::to_string(limit) + " slots");
  std::vector<CaptureSlotRun> out;
  out.reserve(runs.size());
  int64_t total = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string run_what = what + " run " + std::to_string(r);
    if (!runs[r].is_array() || runs[r].size() != 2)
      fail(path, run_what + " must be a pair [first, count], got " + jsonSnippet(runs[r]));
    CaptureSlotRun run;
    run.first = jsonInteger(runs[r][0], path, run_what + " first", allow_padding ? kCapturePaddingSlot : 0,
                            pool_slots - 1);
    if (run.first == -1) fail(path, run_what + " first is -1: a " + unit + " is -2 (padding) or in [0, " +
                                        std::to_string(pool_slots - 1) + "]");
    run.count = jsonInteger(runs[r][1], path, run_what + " count", 1, limit);
    if (run.first >= 0 && run.first + run.count > pool_slots)  // both bounded: no overflow
      fail(path, run_what + " runs to " + unit + " " + std::to_string(run.first + run.count - 1) + ", past the pool's " +
                     std::to_string(pool_slots) + " " + unit + "s");
    total += run.count;
    if (total > limit) fail(path, what + " covers more than " + std::to_string(limit) + " slots");
    out.push_back(run);
  }
  return out;
}

// The pool runs must cover exactly the row runs' slots, padding where they
// hold padding and only there. Walks both run lists at once: O(runs).
void requireSamePadding(const std::string& path, const std::string& what, const std::vector<CaptureSlotRun>& pool,
                        const std::vector<CaptureSlotRun>& rows, int64_t slots) {
  int64_t covered = 0;
  for (const auto& run : pool) covered += run.count;
  if (covered != slots)
    fail(path, what + " covers " + std::to_string(covered) + " slots where the layer has " + std::to_string(slots));
  size_t p = 0, r = 0;
  int64_t p_left = pool.empty() ? 0 : pool[0].count, r_left = rows.empty() ? 0 : rows[0].count, slot = 0;
  while (p < pool.size() && r < rows.size()) {
    const bool pool_padding = pool[p].first == kCapturePaddingSlot;
    const bool row_padding = rows[r].first == kCapturePaddingSlot;
    if (pool_padding != row_padding)
      fail(path, what + " slot " + std::to_string(slot) + (pool_padding ? " is padding where the layer holds a row"
                                                                         : " names a pool slot where the layer holds padding"));
    const int64_t step = std::min(p_left, r_left);
    slot += step;
    p_left -= step;
    r_left -= step;
    if (p_left == 0 && ++p < pool.size()) p_left = pool[p].count;
    if (r_left == 0 && ++r < rows.size()) r_left = rows[r].count;
  }
}

std::vector<std::vector<std::vector<CaptureSlotRun>>> parseLayers(const std::string& path, const std::string& what,
                                                                  const Json& layers, const CaptureCacheState& parsed,
                                                                  int64_t batch, int64_t pool_slots) {
  std::vector<std::vector<std::vector<CaptureSlotRun>>> out(parsed.layers.size());
  requireList(path, what, layers, parsed.layers.size(), "layers (the state's)");
  for (size_t layer = 0; layer < parsed.layers.size(); ++layer) {
    const std::string layer_what = what + "[" + std::to_string(layer) + "]";
    const CaptureLayerState& rows = parsed.layers[layer];
    requireList(path, layer_what, layers[layer], static_cast<size_t>(batch), "run lists (one per sequence)");
    for (int64_t b = 0; b < batch; ++b) {
      const std::string sequence_what = layer_what + "[" + std::to_string(b) + "]";
      const auto pool = poolRuns(path, sequence_what, layers[layer][static_cast<size_t>(b)], pool_slots,
                                 std::max<int64_t>(rows.slot_count, 0), true, "pool slot");
      requireSamePadding(path, sequence_what, pool, rows.sequence_runs[static_cast<size_t>(b)], rows.slot_count);
      out[layer].push_back(pool);
    }
  }
  return out;
}

}  // namespace

std::optional<CapturePagedState> parsePagedState(const std::string& path, const std::string& what, const Json& state,
                                                 const CaptureCacheState& parsed, const CaptureManifest& manifest) {
  const auto it = state.find("paged");
  if (it == state.end()) return std::nullopt;
  const std::string at = what + ".paged";
  if (manifest.version < 3)
    fail(path, at + " is a version 3 field; this file is version " + std::to_string(manifest.version));
  const Json& paged = *it;
  if (!paged.is_object()) fail(path, at + " must be an object, got " + jsonSnippet(paged));
  const int64_t block_size = jsonInteger(field(path, at, paged, "block_size"), path, at + ".block_size", 1, kMaxBlockSize);
  const int64_t num_blocks = jsonInteger(field(path, at, paged, "num_blocks"), path, at + ".num_blocks", 1, kMaxPoolSlots);
  if (block_size * num_blocks > kMaxPoolSlots)  // both bounded by 2^30: no overflow
    fail(path, at + ": " + std::to_string(num_blocks) + " blocks of " + std::to_string(block_size) +
                   " rows are more than " + std::to_string(kMaxPoolSlots) + " pool slots");
  CapturePagedState out;
  out.block_size = block_size;
  out.num_blocks = num_blocks;
  out.layers = parseLayers(path, at + ".layers", field(path, at, paged, "layers"), parsed, manifest.batch,
                           block_size * num_blocks);
  const auto free = paged.find("free");
  if (free != paged.end() && !free->is_null()) out.free = poolRuns(path, at + ".free", *free, num_blocks, num_blocks, false, "block");
  return out;
}

}  // namespace kvscope::capture_paged

namespace kvscope {

std::vector<int64_t> CapturePagedState::poolSlots(size_t layer, size_t sequence) const {
  std::vector<int64_t> slots;
  for (const CaptureSlotRun& run : layers.at(layer).at(sequence))
    for (int64_t i = 0; i < run.count; ++i) slots.push_back(run.first < 0 ? run.first : run.first + i);
  return slots;
}

bool CapturePagedState::blockFree(int64_t block) const {
  if (!free) return false;
  for (const CaptureSlotRun& run : *free)
    if (block >= run.first && block < run.first + run.count) return true;
  return false;
}

}  // namespace kvscope
