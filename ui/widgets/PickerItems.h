#pragma once
// The layer and head pickers every panel shows: refilled only when the count
// or a label changes (a refill closes an open popup and resets the selection), and the
// query head a panel shows kept inside the kv head the shared cursor selects.
#include <QString>

#include <functional>

class QComboBox;

namespace kvscope::ui {

// Items 0..count-1, labelled by `label` (default: the number).
void syncPickerItems(QComboBox* box, int count, const std::function<QString(int)>& label = {});

// `query_head` when it reads `kv_head` (heads / kv_heads = group share one),
// else the first query head of that group.
int queryHeadInGroup(int query_head, int kv_head, int group, int heads);

}  // namespace kvscope::ui
