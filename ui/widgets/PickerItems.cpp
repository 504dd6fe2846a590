#include "ui/widgets/PickerItems.h"

#include <QComboBox>

namespace kvscope::ui {

void syncPickerItems(QComboBox* box, int count, const std::function<QString(int)>& label) {
  if (box->count() == count) return;
  box->clear();
  for (int i = 0; i < count; ++i) box->addItem(label ? label(i) : QString::number(i));
}

int queryHeadInGroup(int query_head, int kv_head, int group, int heads) {
  if (query_head / group != kv_head || query_head >= heads) return kv_head * group;
  return query_head;
}

}  // namespace kvscope::ui
