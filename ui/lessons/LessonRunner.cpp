#include "ui/lessons/LessonRunner.h"

#include <QDockWidget>

#include "ui/widgets/PanelHighlight.h"

namespace kvscope::ui {

namespace {
// A page looking for a kind of round (first rejection, first all-accepted)
// steps at most this far before it settles for what it has.
constexpr int64_t kSearchRounds = 40;

bool rejects(const RoundRecord& r) { return r.index >= 1 && r.accepted < static_cast<int64_t>(r.drafts.size()); }
bool acceptsAll(const RoundRecord& r) {
  return r.index >= 1 && r.prune_done && !r.drafts.empty() && r.accepted == static_cast<int64_t>(r.drafts.size());
}

Phase phaseOf(const QString& name) {
  if (name == QStringLiteral("draft")) return Phase::Draft;
  if (name == QStringLiteral("verify")) return Phase::Verify;
  if (name == QStringLiteral("accept")) return Phase::Accept;
  if (name == QStringLiteral("prune")) return Phase::Prune;
  return Phase::Prefill;
}
}  // namespace

LessonRunner::LessonRunner(LessonStage& stage, QObject* parent)
    : QObject(parent), stage_(stage), highlight_(new PanelHighlight) {
  // Made after the stage's own handlers are connected: the context already holds the snapshot.
  connect(&stage_.controller(), &EngineController::snapshotReady, this, &LessonRunner::onSnapshot);
  connect(&stage_.controller(), &EngineController::failed, this, [this](const QString& what, const QString&) {
    if (state_ == State::Idle) return;
    state_ = State::Idle;
    setStatus(tr("%1 failed: the page could not set up its session.").arg(what));
  });
  // The steps panel's explanation and what-if arrive after the window's own handlers drew them.
  connect(&stage_.controller(), &EngineController::explained, this, [this] { settlePanel(); }, Qt::QueuedConnection);
  connect(&stage_.controller(), &EngineController::whatIfReady, this, [this] { settlePanel(); }, Qt::QueuedConnection);
  connect(&stage_.controller(), &EngineController::explainFailed, this, [this] { settlePanel(); }, Qt::QueuedConnection);
}

LessonRunner::~LessonRunner() {
  if (highlight_ && !highlight_->parent()) delete highlight_;
}

QString LessonRunner::highlightedDock() const { return highlighted_ ? highlighted_->objectName() : QString(); }

void LessonRunner::setStatus(const QString& status) { emit statusChanged(status); }

void LessonRunner::show(const Lesson& lesson, int page) {
  lesson_ = lesson;
  page_ = page;
  what_if_done_ = false;
  page_cursor_ = Cursor{};
  emit pageStarted();
  const LessonSession session = lesson_.sessionOf(page);
  wanted_key_ = lesson_.file + QLatin1Char('|') + session.key();
  const SessionSnapshot* snapshot = stage_.context().snapshot();
  if (snapshot && !snapshot->replay_only && live_key_ == wanted_key_) {
    proceed();
    return;
  }
  state_ = State::WaitingForSession;
  setStatus(session.diff ? tr("Running the diff for this page\u2026") : tr("Starting this page's session\u2026"));
  stage_.startSession(session);
}

void LessonRunner::onSnapshot(SnapshotPtr snapshot, SnapshotReason reason) {
  if (!snapshot) return;
  const bool fresh = reason == SnapshotReason::NewSession || reason == SnapshotReason::Diff || reason == SnapshotReason::Trace;
  if (state_ == State::WaitingForSession && (reason == SnapshotReason::NewSession || reason == SnapshotReason::Diff)) {
    live_key_ = wanted_key_;
    proceed();
  } else if (state_ == State::Stepping && reason == SnapshotReason::Step) {
    proceed();
  } else if (fresh) {
    live_key_.clear();  // someone else replaced the lesson's session: the next page starts its own
  }
}

int64_t LessonRunner::wantedRound(const SessionSnapshot& snapshot) const {
  const QString& round = page().cursor.round;
  if (round == QStringLiteral("latest") || round == QStringLiteral("root-cause")) return snapshot.lastRound();
  for (const RoundRecord& r : snapshot.rounds) {
    if (round == QStringLiteral("first-rejection") && rejects(r) && r.prune_done) return r.index;
    if (round == QStringLiteral("first-all-accepted") && acceptsAll(r)) return r.index;
  }
  if (round == QStringLiteral("first-rejection") || round == QStringLiteral("first-all-accepted")) return -1;
  const int64_t number = round.toLongLong();
  return number <= snapshot.lastRound() ? number : -1;
}

bool LessonRunner::needsMoreRounds(const SessionSnapshot& snapshot) const {
  if (snapshot.finished || snapshot.replay_only) return false;
  // A round counts once its prune ran.
  const int64_t complete = snapshot.lastPhase() == Phase::Prune || snapshot.lastRound() == 0 ? snapshot.lastRound()
                                                                                             : snapshot.lastRound() - 1;
  if (complete < page().rounds) return true;
  const QString& round = page().cursor.round;
  if (round == QStringLiteral("latest") || round == QStringLiteral("root-cause")) return false;
  if (wantedRound(snapshot) >= 0 && wantedRound(snapshot) <= complete) return false;
  const bool searching = !round.front().isDigit();
  return searching ? complete < kSearchRounds : true;
}

void LessonRunner::proceed() {
  const SessionSnapshot* snapshot = stage_.context().snapshot();
  if (!snapshot) return;
  if (needsMoreRounds(*snapshot)) {
    state_ = State::Stepping;
    setStatus(tr("Stepping round %1 for this page\u2026").arg(snapshot->lastRound() + 1));
    stage_.controller().stepRound();
    return;
  }
  // What the lesson stepped, the lesson file can step again: not unsaved work.
  stage_.markReproducible(snapshot->lastRound());
  QString note;
  if (wantedRound(*snapshot) < 0) {
    note = tr("This session has no round of the kind this page looks for (%1); showing the latest.")
               .arg(page().cursor.round);
  }
  placeCursor(*snapshot);
  page_cursor_ = stage_.context().cursor();
  highlightPanel();
  setStatus(note);
  const bool steps = page().panel == QStringLiteral("attention-steps") || !page().what_if_remove.isEmpty();
  if (!steps) {
    finish();
    return;
  }
  state_ = State::WaitingForPanel;
  stage_.explainCursor();  // ask for the cursor's explanation now
  settlePanel();
}

void LessonRunner::settlePanel() {
  if (state_ != State::WaitingForPanel || page_ < 0) return;
  stage_.explainCursor();  // the cursor's query asked for (a no-op when it is shown or on its way)
  tickWhatIf();  // once the query's explanation is shown: tick the page's rows and recompute
  if (!stage_.explanationSettled()) return;
  if (!page().what_if_remove.isEmpty() && !what_if_done_ && stage_.explanation()) return;  // tickWhatIf did not start yet
  finish();
}

void LessonRunner::finish() {
  state_ = State::Idle;
  if (!page().step.isEmpty() && page().panel == QStringLiteral("attention-steps")) {
    stage_.showExplanationStep(page().step);
  }
  // The KV Cache shows its rows unless the page asks for its paged pool.
  if (page().panel == QStringLiteral("kv")) stage_.showKvPool(page().step == QStringLiteral("pool"));
  emit pageReady();
}

void LessonRunner::placeCursor(const SessionSnapshot& snapshot) {
  DebuggerContext& context = stage_.context();
  const LessonCursor& want = page().cursor;
  if (want.round == QStringLiteral("root-cause")) {
    if (const Cursor cause = stage_.rootCauseCursor(); cause.valid()) {
      context.setCursor(cause);
      return;
    }
  }
  const int64_t round = std::max<int64_t>(0, wantedRound(snapshot) < 0 ? snapshot.lastRound() : wantedRound(snapshot));
  const CacheRole cache = want.cache == QStringLiteral("drafter") ? CacheRole::Drafter : CacheRole::Target;
  context.setLayerHead(cache, want.layer, want.head);
  context.goToRound(round);
  if (!want.phase.isEmpty()) context.goToMoment({round, round == 0 ? Phase::Prefill : phaseOf(want.phase)});
  const RoundRecord* record = round >= 1 ? snapshot.round(round) : nullptr;
  int64_t position = -1;
  if (want.position == QStringLiteral("prompt-last")) position = snapshot.prompt_length - 1;
  else if (want.position == QStringLiteral("first-draft") && record) position = record->start_length;
  else if (want.position == QStringLiteral("first-rejected") && record) position = record->start_length + record->accepted;
  else if (want.position == QStringLiteral("last")) {
    position = record ? record->start_length + static_cast<int64_t>(record->emitted.size()) - 1 : snapshot.prompt_length - 1;
  } else if (!want.position.isEmpty() && want.position.front().isDigit()) {
    position = want.position.toLongLong();
  }
  if (position >= 0) context.selectPosition(position);
}

void LessonRunner::highlightPanel() {
  highlighted_ = nullptr;
  QDockWidget* dock = page().panel.isEmpty() ? nullptr : stage_.panelDock(page().panel);
  if (dock) {
    dock->show();
    dock->raise();
    highlighted_ = dock;
  }
  if (!highlight_) highlight_ = new PanelHighlight;
  highlight_->outline(dock);
}

void LessonRunner::tickWhatIf() {
  if (state_ != State::WaitingForPanel || page_ < 0 || page().what_if_remove.isEmpty()) return;
  const AttentionExplanation* shown = stage_.explanation();
  const int64_t position = stage_.context().cursor().position;
  if (what_if_done_ || !shown || shown->request.position != position) return;  // the cursor's explanation is on its way
  what_if_done_ = true;
  QVector<int64_t> removed;
  for (int row : page().what_if_remove) removed << (row < 0 ? position : row);
  stage_.recomputeWithout(removed);
}

}  // namespace kvscope::ui
