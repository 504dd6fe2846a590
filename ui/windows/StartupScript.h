#pragma once
// What the window does when it opens, as data: the command line
// (MainWindowOptions) becomes a list of steps (load the models, start a
// session or run the diff or open a lesson or a file, run the compression
// slots, step N rounds, select a moment), and MainWindow runs them one at a
// time, each once the engine has reported the previous one done: the way a
// lesson's pages are run (ui/lessons/LessonRunner), and named in the log.
#include <QString>
#include <QStringList>
#include <cstdint>
#include <vector>

#include "ui/context/DebuggerContext.h"

namespace kvscope::ui {

struct MainWindowOptions;

enum class StartupAction { LoadModels, StartSession, RunDiff, OpenLesson, OpenFile, RunCompression, StepRounds, SelectMoment };

struct StartupStep {
  StartupAction action = StartupAction::LoadModels;
  int count = 0;          // StepRounds: rounds; OpenLesson: the lesson (0-based)
  int page = 0;           // OpenLesson: its page (0-based)
  int64_t round = -1;     // SelectMoment: a round, or MainWindowOptions::kFirstRejection
  int64_t position = -1;  // SelectMoment: a position, kFirstRejection, or -1 (keep)
  QString file;           // OpenFile
  QStringList compression_slots;  // RunCompression: "h2o:0.25", one per slot

  // "load the models", "step 3 rounds", ...: for the log.
  QString describe() const;
  // Whether a snapshot for this reason is the engine saying the step is done
  // (StepRounds: one of its rounds).
  bool doneBy(SnapshotReason reason) const;
};

// The steps the options ask for, in the order they run. Nothing without
// load_on_start.
std::vector<StartupStep> startupSteps(const MainWindowOptions& options);

// The steps and how far they got.
class StartupScript {
 public:
  StartupScript() = default;
  explicit StartupScript(std::vector<StartupStep> steps) : steps_(std::move(steps)) {}

  const StartupStep* current() const { return !stopped_ && next_ < steps_.size() ? &steps_[next_] : nullptr; }
  void advance() {
    if (next_ < steps_.size()) ++next_;
    rounds_stepped_ = 0;
  }
  // StepRounds: the rounds the current step has stepped so far.
  int roundsStepped() const { return rounds_stepped_; }
  void countRound() { ++rounds_stepped_; }
  // Drops the steps not yet run (a failure, or the user took over); a
  // finished script stays finished.
  void stop() {
    if (next_ < steps_.size()) stopped_ = true;
  }
  bool running() const { return current() != nullptr; }
  // Whether it ended before its last step.
  bool stopped() const { return stopped_; }
  const std::vector<StartupStep>& steps() const { return steps_; }
  size_t stepsDone() const { return next_; }

 private:
  std::vector<StartupStep> steps_;
  size_t next_ = 0;
  int rounds_stepped_ = 0;
  bool stopped_ = false;
};

}  // namespace kvscope::ui
