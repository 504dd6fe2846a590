#pragma once
// The settings of one compression slot (A or B) of the Compression panel: an
// eviction policy with its budget and parameters, and optional element
// pruning. Fields a chosen policy does not read are disabled, not hidden, so
// the form keeps its shape. Values are not clamped to the valid ranges: the
// core's validation (CompressionSpec::validate) judges them and its message
// is what the user sees, the same words as the CLI's.
#include <QString>
#include <QWidget>

#include "core/compress/prefill_compression.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSpinBox;

namespace kvscope::ui {

class CompressionSettingsForm : public QWidget {
  Q_OBJECT
 public:
  // `optional`: the slot has an "enabled" box (slot B compares against A).
  explicit CompressionSettingsForm(const QString& slot, bool optional, QWidget* parent = nullptr);

  bool enabledSlot() const;
  void setEnabledSlot(bool enabled);
  // The spec the fields say; false with the core's (or the form's) message
  // when the settings are not valid.
  bool spec(CompressionSpec* out, QString* error) const;
  // Short words for the settings: "h2o 25%", "per-token 50%", "snapkv 50% + per-channel 70%".
  QString label() const;

  // Field setters (tests, the --compression flag). A name the core does not
  // know is refused with its message.
  bool setPolicy(const QString& name, QString* error = nullptr);  // "none" for pruning only
  void setBudget(double fraction);
  void setWindow(int window);  // -1: the policy's default
  void setSinks(int sinks);
  void setKernel(int kernel);
  void setSeed(int seed);
  bool setElement(const QString& axis, QString* error = nullptr);  // "off", "per-token", "per-channel"
  bool setScore(const QString& score, QString* error = nullptr);   // "magnitude", "output-aware"
  void setSparsity(double k, double v);
  void setDenseWindow(int rows);
  // "POLICY:BUDGET" (h2o:0.25) or "AXIS:SPARSITY" (per-channel:0.7), the
  // --compression flag's words; enables the slot.
  bool applyShorthand(const QString& text, QString* error);

 signals:
  void changed();

 private:
  void updateEnabledFields();
  QString policyName() const;
  QString elementName() const;

  QCheckBox* enabled_ = nullptr;
  QComboBox* policy_;
  QDoubleSpinBox* budget_;
  QSpinBox* window_;
  QSpinBox* sinks_;
  QSpinBox* kernel_;
  QSpinBox* seed_;
  QComboBox* element_;
  QComboBox* score_;
  QDoubleSpinBox* k_sparsity_;
  QDoubleSpinBox* v_sparsity_;
  QSpinBox* dense_window_;
};

}  // namespace kvscope::ui
