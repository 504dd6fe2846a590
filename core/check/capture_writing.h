#pragma once
// What both of kvscope's capture writers share (capture_writer.h writes one
// sequence as version 1, batch_capture_writer.h a batch as version 2 or 3):
// row ids stored once per role and layer, a state's runs, the models'
// descriptions, a forward's inputs as fed, the row tensors, what a capture
// cannot hold, and the file itself (docs/capture-format.md).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "core/check/capture_models.h"
#include "core/model/model_config.h"
#include "core/trace/session_record.h"

namespace kvscope {

class CausalLM;

struct CaptureModelSource {
  std::string name_or_path;  // the model directory
  const CausalLM* model = nullptr;
};

namespace capture_writing {

using Json = nlohmann::json;

// Row ids of one role: per layer, the ledger entries (of one sequence's
// ledger: a batch's sequences each keep their own) in the order first met
// (row id = index), so each row is stored once.
class RowIds {
 public:
  struct Source {
    size_t sequence = 0;
    int64_t entry = 0;
    bool operator<(const Source& o) const { return sequence != o.sequence ? sequence < o.sequence : entry < o.entry; }
  };

  explicit RowIds(int64_t layers) : entries_(static_cast<size_t>(layers)), ids_(static_cast<size_t>(layers)) {}

  int64_t idOf(int64_t layer, int64_t entry, size_t sequence = 0);
  const std::vector<Source>& entries(int64_t layer) const { return entries_[static_cast<size_t>(layer)]; }
  int64_t layers() const { return static_cast<int64_t>(entries_.size()); }

 private:
  std::vector<std::vector<Source>> entries_;
  std::vector<std::map<Source, int64_t>> ids_;
};

const char* roleName(CacheRole role);

// One layer's rows as runs [first, count] of consecutive row ids.
Json runsOf(const std::vector<int64_t>& ids);
// Per layer, the row ids of a layout's entries (of sequence `sequence`'s ledger).
std::vector<std::vector<int64_t>> idsOf(const CacheLayout& layout, RowIds& rows, size_t sequence = 0);
// A state of append layers holding those row ids.
Json stateOf(const std::vector<std::vector<int64_t>>& ids);

// A model's manifest entry, `calls` its role's calls.
Json modelOf(const CaptureModel& model, int64_t calls);

// A forward's inputs as fed: in position order (a fault may store them
// otherwise), as (token ids, rotary positions).
std::pair<std::vector<int64_t>, std::vector<int64_t>> fedInputs(const SessionRecord& record, const CacheEvent& e);

// One role's rows as the capture stores them: per layer, keys and values
// [kv_heads, n_rows, head_dim] float32, read from each row's own ledger
// (records: one per sequence, as `rows` numbers them).
void storeRowTensors(const RowIds& rows, const std::string& role, const ModelConfig& config,
                     const std::vector<const SessionRecord*>& records, std::vector<std::pair<std::string, at::Tensor>>& out);

// Throws Error for what the format cannot hold: an uncached session, an
// eviction policy's masks (rows masked per kv head, not removed), a missing
// model.
void refuseWhatACaptureCannotHold(const SessionRecord& record, const CaptureModelSource& target,
                                  const CaptureModelSource& drafter);

// Writes the .kvcapture: the tensors (float32, contiguous) and the manifest.
void writeCaptureFile(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      int version, const Json& manifest);

}  // namespace capture_writing
}  // namespace kvscope
