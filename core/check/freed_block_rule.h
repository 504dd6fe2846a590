#pragma once
// A paged engine's rollback that frees blocks its sequence's table still
// maps, read off format version 3's pool fields (docs/capture-format-v3.md,
// "Paged pools"; docs/paged-engines.md). A sequence's table is seen only
// through the rows it holds, so a block freed past the rows a rollback kept
// shows later: the sequence writes its next rows there without the pool
// handing the block out again. That block is still on the free list after
// the call that wrote there, or another sequence holds it by then (the pool
// handed it out), or the sequence holds it twice. The rollback is then the
// change between the two calls of the sequence's role around it, and this
// rule marks that change's event with the blocks (CacheEvent::dangling_blocks),
// which the one walker names (kind "block") as it names kvscope's own
// rollback (core/audit/contract_walk.h). A block freed while it still holds
// kept rows is left to the forward whose rows go wrong there (named with
// paged_explanation.h's "a freed block"). Needs the free lists; a file
// without them is left as it is. Torch-free.
#include <cstdint>
#include <string>

#include "core/audit/root_cause_report.h"
#include "core/capture/capture_manifest.h"
#include "core/check/capture_record_view.h"
#include "core/check/capture_timeline.h"

namespace kvscope {

// `file`: the whole capture's manifest (a sequence's view keeps no pool);
// `view`, `timeline`, `record`: sequence `sequence`'s, as the walker will
// walk them. Returns how many changes it marked.
int64_t markBlocksFreedWhileMapped(const CaptureManifest& file, int64_t sequence, const CaptureManifest& view,
                                   const CaptureTimeline& timeline, CaptureRecordView& record);

// The sentence's tail for a cause with dangling_blocks: "; its block table
// still maps block 7 (rows 12-13), which the pool freed: ..." ("" without).
std::string freedBlocksText(const RootCause& cause);

}  // namespace kvscope
