#pragma once
// Sets up what a lesson page needs, on the live engine: the session (through
// the lesson stage, so an unsaved session is asked about first), the rounds
// it steps, the cursor, the raised and outlined panel, and the "what if"
// rows ticked. Setting up is a small state machine driven by the engine's
// snapshots: start the session -> step a round per snapshot until the page's
// rounds (or the round it looks for) exist -> place the cursor -> wait for
// the outlined panel to show that moment (Attention Step by Step's
// explanation, the "what if" recompute) -> scroll to the page's step, and
// only then say the page is ready: the lesson text appears with the state it
// describes, never before it.
#include <QObject>
#include <QPointer>

#include "ui/context/DebuggerContext.h"
#include "ui/lessons/Lesson.h"
#include "ui/lessons/LessonStage.h"

namespace kvscope::ui {

class PanelHighlight;

class LessonRunner : public QObject {
  Q_OBJECT
 public:
  // `stage` outlives the runner.
  explicit LessonRunner(LessonStage& stage, QObject* parent = nullptr);
  ~LessonRunner() override;

  void show(const Lesson& lesson, int page);
  // Set up and idle (what tests wait for).
  bool ready() const { return state_ == State::Idle && page_ >= 0; }
  // The page's moment (where it put the cursor), once ready: its text is bound to it.
  const Cursor& pageCursor() const { return page_cursor_; }
  // The dock objectName the page outlines (empty: none).
  QString highlightedDock() const;

 signals:
  void statusChanged(const QString& status);
  void pageReady();
  // Setting the page up started (its text is withheld until pageReady).
  void pageStarted();

 private:
  enum class State { Idle, WaitingForSession, Stepping, WaitingForPanel };
  void onSnapshot(SnapshotPtr snapshot, SnapshotReason reason);
  void proceed();
  // The round the page's cursor wants, or -1 when it is not recorded yet.
  int64_t wantedRound(const SessionSnapshot& snapshot) const;
  bool needsMoreRounds(const SessionSnapshot& snapshot) const;
  void placeCursor(const SessionSnapshot& snapshot);
  void highlightPanel();
  void tickWhatIf();
  // WaitingForPanel: once the outlined panel shows the page's moment, finish().
  void settlePanel();
  void finish();
  void setStatus(const QString& status);
  const LessonPage& page() const { return lesson_.pages[page_]; }

  LessonStage& stage_;
  Lesson lesson_;
  int page_ = -1;
  State state_ = State::Idle;
  QString wanted_key_;  // the session this page needs (lesson file + settings)
  QString live_key_;    // the lesson session that is live (empty: none, or the user replaced it)
  bool what_if_done_ = false;  // the page's "what if" rows were ticked and recomputed
  QPointer<PanelHighlight> highlight_;  // lives on the outlined dock (which may go first)
  QPointer<QWidget> highlighted_;
  Cursor page_cursor_;
};

}  // namespace kvscope::ui
