// MainWindow's start-up script (ui/windows/StartupScript.h): the steps the
// command line asked for (load the models, start a session or a diff, open a
// lesson or a file, step rounds, select a moment, run a compression), each
// started here and finished when the snapshot it waits for arrives
// (onSnapshot -> continueStartup). Kept apart from the window's construction
// and menus in MainWindow.cpp.
#include "ui/windows/MainWindow.h"

#include <QSpinBox>

#include <spdlog/spdlog.h>

#include "ui/windows/CompressionPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/Workspaces.h"

namespace kvscope::ui {

void MainWindow::runStartupSteps() {
  while (const StartupStep* step = startup_.current()) {
    spdlog::info("start-up: {}", step->describe().toStdString());
    in_startup_step_ = true;
    const StepStart start = startStartupStep(*step);
    in_startup_step_ = false;
    if (start == StepStart::Waiting) return;
    if (start == StepStart::Failed) {
      startup_.stop();
      return;
    }
    startup_.advance();
  }
}

MainWindow::StepStart MainWindow::startStartupStep(const StartupStep& step) {
  const SessionSnapshot* snapshot = context_.snapshot();
  switch (step.action) {
    case StartupAction::LoadModels:
      requestLoad(options_.models);
      return StepStart::Waiting;
    case StartupAction::StartSession:
    case StartupAction::RunDiff: {
      const auto spec = panelSession();
      if (!spec) return StepStart::Failed;
      if (step.action == StartupAction::StartSession) {
        controller_.startSession(*spec);
      } else {
        controller_.runDiff(*spec);
        raisePanel(panels_.diff);
      }
      return StepStart::Waiting;
    }
    case StartupAction::OpenLesson:
      openLesson(step.count, step.page);  // its runner steps the lesson's own session
      return StepStart::Done;
    case StartupAction::OpenFile:
      // The last step (a replay has nothing to step), done when the file's
      // snapshot arrives: a file that fails to open stops the start-up, so a
      // --screenshot run exits instead of waiting for a snapshot.
      if (!options_.other_ranks.isEmpty()) {
        openCaptures(QStringList{step.file} + options_.other_ranks);
        return StepStart::Waiting;
      }
      openFile(step.file);
      return startup_.stopped() ? StepStart::Failed : StepStart::Waiting;
    case StartupAction::RunCompression:
      runRequestedCompression(step.compression_slots);  // a job of its own, beside the next steps
      return StepStart::Done;
    case StartupAction::StepRounds:
      if (step.count <= 0 || !snapshot || snapshot->finished) return StepStart::Done;
      controller_.stepRound();
      return StepStart::Waiting;
    case StartupAction::SelectMoment:
      selectRequestedMoment(step.round, step.position);
      return StepStart::Done;
  }
  return StepStart::Failed;
}

void MainWindow::stopStartupForUser() {
  if (!in_startup_step_) startup_.stop();
}

void MainWindow::continueStartup(SnapshotReason reason, bool finished) {
  const StartupStep* step = startup_.current();
  if (!step || !step->doneBy(reason)) return;
  if (step->action == StartupAction::StepRounds) {
    startup_.countRound();
    if (startup_.roundsStepped() < step->count && !finished) {
      controller_.stepRound();
      return;
    }
  }
  startup_.advance();
  runStartupSteps();
}

void MainWindow::selectRequestedMoment(int64_t round, int64_t position) {
  const SessionSnapshot* snapshot = context_.snapshot();
  if (!snapshot) return;
  if (round == MainWindowOptions::kFirstRejection) {
    round = -1;
    for (const RoundRecord& record : snapshot->rounds) {
      if (record.index >= 1 && record.accepted < static_cast<int64_t>(record.drafts.size())) {
        round = record.index;
        break;
      }
    }
  }
  if (position == MainWindowOptions::kFirstRejection && round >= 1) {
    if (const RoundRecord* record = snapshot->round(round)) position = record->start_length + record->accepted;
  }
  if (round >= 0) context_.goToRound(round);
  if (position >= 0) context_.selectPosition(position);
}

void MainWindow::runRequestedCompression(const QStringList& compression_slots) {
  QString error;
  if (!panels_.compression->applyShorthands(compression_slots, &error)) {
    showError(tr("--compression"), error);
    return;
  }
  workspaces_->switchTo(Workspace::Compress);
  raisePanel(panels_.compression);
  if (options_.compression_speculate_gamma >= 0) {
    panels_.compression->speculationGammaBox()->setValue(options_.compression_speculate_gamma);
  }
  panels_.compression->runCompression();
}

}  // namespace kvscope::ui
