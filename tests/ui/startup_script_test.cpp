// The window's start-up steps as data (ui/windows/StartupScript): what each
// command line asks for, in order, and a window that runs them step by step,
// stopping at the first failure.
#include <QtTest>

#include "tests/ui/ui_test_support.h"
#include "ui/windows/StartupScript.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

QStringList described(const MainWindowOptions& options) {
  QStringList steps;
  for (const StartupStep& step : startupSteps(options)) steps << step.describe();
  return steps;
}

}  // namespace

class StartupScriptTest : public QObject {
  Q_OBJECT

 private slots:
  void eachCommandLineBecomesItsSteps() {
    MainWindowOptions plain;
    QCOMPARE(described(plain), (QStringList{"load the models", "start a session"}));

    MainWindowOptions demo;
    demo.initial_rounds = 3;
    demo.select_round = MainWindowOptions::kFirstRejection;
    demo.select_position = MainWindowOptions::kFirstRejection;
    demo.compression = {QStringLiteral("h2o:0.25"), QStringLiteral("streaming:0.25")};
    QCOMPARE(described(demo), (QStringList{"load the models", "start a session",
                                           "run the compression slots h2o:0.25, streaming:0.25", "step 3 rounds",
                                           "select the first rejected round and the first rejected position"}));

    MainWindowOptions diff;
    diff.run_diff = true;
    diff.initial_rounds = 5;  // the diff runs its session to the end: nothing to step
    diff.select_round = 2;
    QCOMPARE(described(diff), (QStringList{"load the models", "run the cached-vs-uncached diff", "select round 2"}));

    MainWindowOptions lesson;
    lesson.lesson = 1;
    lesson.lesson_page = 2;
    lesson.initial_rounds = 4;  // a lesson steps its own session
    QCOMPARE(described(lesson), (QStringList{"load the models", "open lesson 2 at page 3"}));

    MainWindowOptions file;
    file.open_file = QStringLiteral("/tmp/a.kvtrace");
    file.run_diff = true;  // the file wins: it is what the user pointed at
    QCOMPARE(described(file), (QStringList{"load the models", "open /tmp/a.kvtrace"}));

    MainWindowOptions none;
    none.load_on_start = false;
    QVERIFY(startupSteps(none).empty());
  }

  void theWindowRunsItsStepsInOrder() {
    MainWindowOptions options = fixtureOptions();
    options.initial_rounds = 3;
    options.select_round = 1;
    MainWindow window(options);
    QCOMPARE(window.startupScript().steps().size(), size_t{4});
    QTRY_VERIFY_WITH_TIMEOUT(!window.startupScript().running() && !window.controller().busy(), kTimeout);
    QCOMPARE(window.startupScript().stepsDone(), size_t{4});
    QVERIFY(!window.startupScript().stopped());
    const SessionSnapshot* snapshot = window.context().snapshot();
    QVERIFY(snapshot != nullptr);
    QCOMPARE(snapshot->lastRound(), int64_t{3});         // stepped three rounds
    QCOMPARE(window.context().cursor().round, int64_t{1});  // then selected round 1
  }

  void aFailedStepStopsTheRest() {
    MainWindowOptions options = fixtureOptions();
    options.models.target_dir = KVSCOPE_FIXTURES "/models/no-such-model";
    options.initial_rounds = 3;
    MainWindow window(options);
    QTRY_VERIFY_WITH_TIMEOUT(errorDialog() != nullptr, kTimeout);
    QVERIFY(!window.startupScript().running());
    QVERIFY(window.startupScript().stopped());
    QCOMPARE(window.startupScript().stepsDone(), size_t{0});  // stopped at loading the models
    errorDialog()->accept();
    QVERIFY(window.context().snapshot() == nullptr);  // no session started, nothing stepped
  }
};

QTEST_MAIN(StartupScriptTest)
#include "startup_script_test.moc"
