#pragma once
// What a tensor-parallel rank's capture holds, in words, from the snapshot
// (SessionSnapshot::rank, CacheGeometry::first_kv_head): the status bar's rank
// picker and the KV Cache hover text say it.
#include <QString>

#include "core/snapshot/snapshot.h"

namespace kvscope::ui {

// "rank 1 of 2 holds target KV heads 2-3 of 4, drafter KV head 1 of 2"; "" for
// a capture that is not a rank's.
QString shardText(const SessionSnapshot& snapshot);

// The status bar's short form beside the rank picker, which names the rank
// itself: "holds KV head 1 of 2" (target and drafter alike), else "holds
// target KV heads 2-3 of 4, drafter KV head 1 of 2"; "" for no rank.
QString shardNote(const SessionSnapshot& snapshot);

// "KV heads 2-3 of 4" ("KV head 1 of 2") of one cache; "" for a whole cache.
QString heldHeadsText(const CacheGeometry& geometry);

}  // namespace kvscope::ui
