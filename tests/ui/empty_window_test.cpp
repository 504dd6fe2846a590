// A window with nothing loaded (no models yet, or models that failed to
// load): every workspace and every panel is shown and refreshed without a
// crash, and each panel says what to do instead of showing stale or blank
// plots. Set KVSCOPE_TEST_SHOTS=DIR to keep a picture of each workspace.
#include <QDockWidget>
#include <QLabel>
#include <QtTest>

#include "tests/ui/ui_test_support.h"
#include "ui/windows/LessonPanel.h"
#include "ui/windows/ViewerPanel.h"
#include "ui/windows/Workspaces.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

class EmptyWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { useTestSettings("empty_window_test"); }

  void everyPanelOfEveryWorkspaceShowsWithNothingLoaded() {
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    const QString shots = qEnvironmentVariable("KVSCOPE_TEST_SHOTS");
    for (Workspace workspace : {Workspace::Debug, Workspace::Teach, Workspace::Compress, Workspace::Capture}) {
      window.workspaces()->switchTo(workspace);
      for (QDockWidget* dock : window.docks()) {
        dock->show();
        dock->raise();
        if (auto* panel = qobject_cast<ViewerPanel*>(dock->widget())) panel->flushRefresh();
        QCoreApplication::processEvents();
        if (!shots.isEmpty()) {
          window.grab().save(QStringLiteral("%1/%2-%3.png").arg(shots, Workspaces::name(workspace), dock->objectName()));
        }
      }
    }
    QVERIFY(window.context().snapshot() == nullptr);
    // The panels that show a session say how to get one; the ones used before
    // there is a session (Session, Lessons, Compression) are left usable.
    int noted = 0;
    for (ViewerPanel* panel : window.findChildren<ViewerPanel*>()) {
      const bool used_before_a_session = panel == static_cast<ViewerPanel*>(window.sessionPanel()) ||
                                         panel == static_cast<ViewerPanel*>(window.lessonPanel()) ||
                                         panel == static_cast<ViewerPanel*>(window.compressionPanel());
      const QLabel* note = panel->emptyNote();
      if (used_before_a_session) {
        QVERIFY2(note == nullptr || !note->isVisibleTo(panel), qPrintable(panel->objectName()));
        continue;
      }
      QVERIFY2(note != nullptr && note->isVisibleTo(panel), panel->metaObject()->className());
      QVERIFY(note->text().contains(QStringLiteral("Load the models")));
      QCOMPARE(note->geometry(), panel->rect());  // covers the empty axes
      ++noted;
    }
    QCOMPARE(noted, 7);  // KV Cache, Verify Attention, Attention Step by Step, Row History, Tokens, Timeline, Cache Diff
  }

  void theNotesGoOnceASessionIsShown() {
    MainWindow window(fixtureOptions());
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    flush(window);
    for (ViewerPanel* panel : window.findChildren<ViewerPanel*>()) {
      const QLabel* note = panel->emptyNote();
      QVERIFY2(note == nullptr || !note->isVisibleTo(panel), panel->metaObject()->className());
    }
  }
};

QTEST_MAIN(EmptyWindowTest)
#include "empty_window_test.moc"
