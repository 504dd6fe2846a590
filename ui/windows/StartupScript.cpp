#include "ui/windows/StartupScript.h"

#include "ui/windows/MainWindow.h"

namespace kvscope::ui {

namespace {

QString momentText(int64_t value, const char* word) {
  if (value == MainWindowOptions::kFirstRejection) return QStringLiteral("the first rejected %1").arg(QLatin1String(word));
  return QStringLiteral("%1 %2").arg(QLatin1String(word)).arg(value);
}

// What runs once the models are loaded: a lesson, a file, the diff or a session.
StartupStep firstRun(const MainWindowOptions& options) {
  StartupStep step;
  if (options.lesson >= 0) {
    step.action = StartupAction::OpenLesson;
    step.count = options.lesson;
    step.page = options.lesson_page;
  } else if (!options.open_file.isEmpty()) {
    step.action = StartupAction::OpenFile;
    step.file = options.open_file;
  } else {
    step.action = options.run_diff ? StartupAction::RunDiff : StartupAction::StartSession;
  }
  return step;
}

}  // namespace

QString StartupStep::describe() const {
  switch (action) {
    case StartupAction::LoadModels: return QStringLiteral("load the models");
    case StartupAction::StartSession: return QStringLiteral("start a session");
    case StartupAction::RunDiff: return QStringLiteral("run the cached-vs-uncached diff");
    case StartupAction::OpenLesson: return QStringLiteral("open lesson %1 at page %2").arg(count + 1).arg(page + 1);
    case StartupAction::OpenFile: return QStringLiteral("open %1").arg(file);
    case StartupAction::RunCompression:
      return QStringLiteral("run the compression slots %1").arg(compression_slots.join(QStringLiteral(", ")));
    case StartupAction::StepRounds: return QStringLiteral("step %1 rounds").arg(count);
    case StartupAction::SelectMoment: {
      QString text = QStringLiteral("select ") + momentText(round, "round");
      if (position != -1) text += QStringLiteral(" and ") + momentText(position, "position");
      return text;
    }
  }
  return QString();
}

bool StartupStep::doneBy(SnapshotReason reason) const {
  switch (action) {
    case StartupAction::StartSession: return reason == SnapshotReason::NewSession;
    case StartupAction::RunDiff: return reason == SnapshotReason::Diff;
    case StartupAction::StepRounds: return reason == SnapshotReason::Step;
    case StartupAction::OpenFile: return reason == SnapshotReason::Trace;  // a replayed trace or capture
    default: return false;
  }
}

std::vector<StartupStep> startupSteps(const MainWindowOptions& options) {
  std::vector<StartupStep> steps;
  if (!options.load_on_start) return steps;
  steps.push_back(StartupStep{StartupAction::LoadModels});
  const StartupStep first = firstRun(options);
  steps.push_back(first);
  if (first.action != StartupAction::StartSession && first.action != StartupAction::RunDiff) return steps;
  if (first.action == StartupAction::StartSession && !options.compression.isEmpty()) {
    StartupStep compression{StartupAction::RunCompression};
    compression.compression_slots = options.compression;
    steps.push_back(compression);
  }
  // The diff runs its session to the end: there is nothing left to step.
  if (first.action == StartupAction::StartSession && options.initial_rounds > 0) {
    StartupStep rounds{StartupAction::StepRounds};
    rounds.count = options.initial_rounds;
    steps.push_back(rounds);
  }
  if (options.select_round != -1) {
    StartupStep select{StartupAction::SelectMoment};
    select.round = options.select_round;
    select.position = options.select_position;
    steps.push_back(select);
  }
  return steps;
}

}  // namespace kvscope::ui
