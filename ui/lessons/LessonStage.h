#pragma once
// What a lesson page acts on, as the lesson runner sees it: the debugger's
// context and engine, the Session form, the panels a page outlines and
// Attention Step by Step's explanation. The main window provides it
// (ui/windows/PanelLessonStage.h); the runner knows no window and no
// panel class, so lessons sit below the windows that show them.
#include <QString>
#include <QVector>

#include <cstdint>

#include "ui/context/DebuggerContext.h"
#include "ui/engine/EngineController.h"
#include "ui/lessons/Lesson.h"

class QDockWidget;

namespace kvscope::ui {

class LessonStage {
 public:
  virtual ~LessonStage() = default;

  virtual DebuggerContext& context() = 0;
  virtual EngineController& controller() = 0;

  // The page's session: the Session form set to its prompt and options, then
  // started (or its diff run), asking first when an unsaved session would be lost.
  virtual void startSession(const LessonSession& session) = 0;
  // The session's first `rounds` rounds were stepped by a lesson: not unsaved work.
  virtual void markReproducible(int64_t rounds) = 0;
  // The diff's root cause (invalid: no diff, or none found).
  virtual Cursor rootCauseCursor() const = 0;
  // The dock of the panel a page names by its lesson id (null: none).
  virtual QDockWidget* panelDock(const QString& lesson_id) const = 0;

  // Attention Step by Step (the "attention-steps" panel):
  // asks for the cursor's explanation now (a no-op when it is shown or on its way);
  virtual void explainCursor() = 0;
  // nothing on its way (no explanation or what-if pending);
  virtual bool explanationSettled() const = 0;
  // the explanation shown (null before the first one arrives);
  virtual const AttentionExplanation* explanation() const = 0;
  // ticks the key rows (sequence positions) for removal and recomputes "what if";
  virtual void recomputeWithout(const QVector<int64_t>& positions) = 0;
  // scrolls the card or box named `step` (lessonStepNames) into view.
  virtual void showExplanationStep(const QString& step) = 0;

  // The KV Cache (the "kv" panel): its Paged pool tab in front (true), or its K/V rows.
  virtual void showKvPool(bool pool) { (void)pool; }
};

}  // namespace kvscope::ui
