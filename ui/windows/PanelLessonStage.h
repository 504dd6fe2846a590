#pragma once
// The stage lessons act on (ui/lessons/LessonStage.h), made of the window's
// panels: the Session form, Cache Diff, Attention Step by Step, and the docks
// found through the panel table's lesson ids. What only the window does
// (starting a session after asking about an unsaved one, keeping track of
// unsaved work) it is given as two calls.
#include <functional>

#include "ui/lessons/LessonStage.h"
#include "ui/windows/PanelTable.h"

class QWidget;

namespace kvscope::ui {

class PanelLessonStage : public LessonStage {
 public:
  struct WindowCalls {
    std::function<void(bool diff)> start_session;  // from the Session form's settings, asking first
    std::function<void(int64_t rounds)> mark_reproducible;
  };
  // `docks_parent` holds the docks (found by object name); everything given outlives the stage.
  PanelLessonStage(DebuggerContext& context, EngineController& controller, const PanelSet& panels,
                   const QWidget& docks_parent, WindowCalls calls);

  DebuggerContext& context() override { return context_; }
  EngineController& controller() override { return controller_; }
  void startSession(const LessonSession& session) override;
  void markReproducible(int64_t rounds) override { calls_.mark_reproducible(rounds); }
  Cursor rootCauseCursor() const override;
  QDockWidget* panelDock(const QString& lesson_id) const override;
  void explainCursor() override;
  bool explanationSettled() const override;
  const AttentionExplanation* explanation() const override;
  void recomputeWithout(const QVector<int64_t>& positions) override;
  void showExplanationStep(const QString& step) override;
  void showKvPool(bool pool) override;

 private:
  DebuggerContext& context_;
  EngineController& controller_;
  const PanelSet& panels_;
  const QWidget& docks_parent_;
  WindowCalls calls_;
};

}  // namespace kvscope::ui
