#pragma once
// Where a wrong row of a paged engine came from (docs/engine-captures.md, "A
// paged engine"). The root cause is the one walker's (contract_walk.h); this
// only reads the blocks of the state it names (format version 3's `paged`,
// docs/capture-format-v3.md) and says, per wrong row, which block and offset
// holds it, which other sequences' tables map that pool slot, whether
// another sequence wrote it in that call (another sequence's row), whether
// the block was freed while still mapped and handed out again (a freed
// block), and whether the row lies past the sequence's length. Torch-free.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/audit/root_cause_report.h"
#include "core/capture/capture_manifest.h"

namespace kvscope {

struct PagedRowFact {
  int64_t layer = 0;
  int64_t row = 0;                        // as the root cause's rows: the index in the call's attended order
  int64_t block = 0;
  int64_t offset = 0;
  std::vector<int64_t> also_mapped_by;    // other sequences whose tables map the same pool slot
  std::optional<int64_t> written_by;      // another sequence that wrote this pool slot in the call
  std::optional<int64_t> handed_to;       // the block was freed while mapped and given to this sequence (may be itself)
  bool on_free_list = false;              // the block is on the engine's free list in this state
  bool past_length = false;               // the row lies past the rows the sequence should hold
};

struct PagedExplanation {
  std::vector<PagedRowFact> rows;  // the root cause's rows, in its order (rows outside the state left out)
  std::string sentence;            // "; in the paged pool, row 9 is in block 5 (offset 1) ..." ("" when nothing to add)
};

// nullopt when the state the root cause names has no `paged` field.
std::optional<PagedExplanation> explainPagedRows(const CaptureManifest& manifest, const RootCause& cause);

// `root_cause` as toJson(RootCause) wrote it: each row_details entry of a row
// the explanation covers gains "block", "offset", "also_mapped_by",
// "written_by", "freed_and_handed_to", "on_free_list", "past_length".
void addPagedFacts(nlohmann::json& root_cause, const PagedExplanation& explanation);

}  // namespace kvscope
