#include "ui/widgets/PickerItems.h"

#include <QComboBox>

namespace kvscope::ui {

void syncPickerItems(QComboBox* box, int count, const std::function<QString(int)>& label) {
  const auto text = [&label](int i) { return label ? label(i) : QString::number(i); };
  // The same count may carry other labels (another rank's KV heads).
  bool same = box->count() == count;
  for (int i = 0; same && i < count; ++i) same = box->itemText(i) == text(i);
  if (same) return;
  box->clear();
  for (int i = 0; i < count; ++i) box->addItem(text(i));
}

int queryHeadInGroup(int query_head, int kv_head, int group, int heads) {
  if (query_head / group != kv_head || query_head >= heads) return kv_head * group;
  return query_head;
}

}  // namespace kvscope::ui
