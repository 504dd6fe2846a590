#include "ui/windows/PanelLessonStage.h"

#include <QDockWidget>
#include <QPushButton>

#include "ui/windows/AttentionStepsPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/SessionPanel.h"

namespace kvscope::ui {

PanelLessonStage::PanelLessonStage(DebuggerContext& context, EngineController& controller, const PanelSet& panels,
                                   const QWidget& docks_parent, WindowCalls calls)
    : context_(context), controller_(controller), panels_(panels), docks_parent_(docks_parent), calls_(std::move(calls)) {}

void PanelLessonStage::startSession(const LessonSession& session) {
  const QString first = session.prompt.isEmpty() ? SessionPanel::samplePrompt() : session.prompt;
  // More prompts: one sequence per line, decoded together as a batch.
  panels_.session->setPrompt(session.more_prompts.isEmpty() ? first : (QStringList{first} + session.more_prompts).join(QLatin1Char('\n')));
  panels_.session->setBatchLines(!session.more_prompts.isEmpty());
  panels_.session->setOptions(session.options);
  calls_.start_session(session.diff);
}

Cursor PanelLessonStage::rootCauseCursor() const { return panels_.diff->rootCauseCursor(); }

QDockWidget* PanelLessonStage::panelDock(const QString& lesson_id) const {
  const QString name = dockNameOfPanel(lesson_id);
  return name.isEmpty() ? nullptr : docks_parent_.findChild<QDockWidget*>(name);
}

void PanelLessonStage::explainCursor() { panels_.steps->flushRefresh(); }

bool PanelLessonStage::explanationSettled() const { return panels_.steps->settled(); }

const AttentionExplanation* PanelLessonStage::explanation() const { return panels_.steps->explanation(); }

void PanelLessonStage::recomputeWithout(const QVector<int64_t>& positions) {
  for (int64_t position : positions) panels_.steps->setRemoved(position, true);
  panels_.steps->recomputeButton()->click();  // as the user asks: the panel sends its request with the rows ticked
}

void PanelLessonStage::showExplanationStep(const QString& step) { panels_.steps->showStep(step); }

}  // namespace kvscope::ui

namespace kvscope::ui {

void PanelLessonStage::showKvPool(bool pool) { panels_.kv->showPoolTab(pool); }

}  // namespace kvscope::ui
