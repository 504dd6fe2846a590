// Closing the main window never loses a session the user ran without asking:
// "Save the trace before closing?" with Save / Discard / Cancel
// once any phase ran past the prefill and nothing was saved since. On the
// fixture model pair, offscreen; the modal dialogs are answered by a timer.
#include <QApplication>
#include <QDialog>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <deque>
#include <functional>

#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

// Answers the modal dialogs a close opens (the question, then the save-file
// dialog). exec() spins its own event loop, where this timer still fires. A
// modal dialog nobody expected is rejected and recorded, so a wrong question
// fails the test instead of hanging it.
class ModalAnswerer : public QObject {
 public:
  using Answer = std::function<void(QDialog*)>;

  ModalAnswerer() {
    connect(&timer_, &QTimer::timeout, this, &ModalAnswerer::poll);
    timer_.start(10);
  }
  // `what`: the dialog's objectName, or its class name ("QFileDialog").
  void expect(const QString& what, Answer answer) { expected_.push_back({what, std::move(answer)}); }
  bool allAnswered() const { return expected_.empty(); }
  const QStringList& unexpected() const { return unexpected_; }

 private:
  static bool matches(const QDialog* dialog, const QString& what) {
    return dialog->objectName() == what || dialog->inherits(what.toUtf8().constData());
  }
  void poll() {
    auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget());
    if (dialog == nullptr || !dialog->isVisible()) return;
    if (!expected_.empty() && matches(dialog, expected_.front().first)) {
      const Answer answer = std::move(expected_.front().second);
      expected_.pop_front();
      answer(dialog);
      return;
    }
    unexpected_ << (dialog->objectName().isEmpty() ? QString::fromUtf8(dialog->metaObject()->className())
                                                   : dialog->objectName());
    dialog->reject();
  }

  QTimer timer_;
  std::deque<std::pair<QString, Answer>> expected_;
  QStringList unexpected_;
};

const QString kQuestion = QStringLiteral("saveFirstDialog");

ModalAnswerer::Answer click(QMessageBox::StandardButton which,
                            const QString& question = QStringLiteral("Save the trace before closing?")) {
  return [which, question](QDialog* dialog) {
    auto* box = qobject_cast<QMessageBox*>(dialog);
    QVERIFY(box != nullptr);
    QCOMPARE(box->text(), question);
    box->button(which)->click();
  };
}

ModalAnswerer::Answer choosePath(const QString& path) {
  return [path](QDialog* dialog) {
    // Typed, as a user would: selectFile() leaves a focused name field alone.
    auto* name = dialog->findChild<QLineEdit*>(QStringLiteral("fileNameEdit"));
    QVERIFY(qobject_cast<QFileDialog*>(dialog) != nullptr && name != nullptr);
    name->setText(path);
    dialog->accept();  // QFileDialog::accept is protected; QDialog's is the public slot
  };
}

// A window on the fixture pair with its prefill done.
void waitForSession(MainWindow& window) {
  window.show();
  QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
}

// Opens a saved trace in a fresh window: what was saved is the session that
// ran, so it replays `rounds` rounds.
void expectSavedRounds(const QString& path, int64_t rounds) {
  MainWindowOptions options = fixtureOptions();
  options.load_on_start = false;
  MainWindow replay(options);
  replay.openTrace(path);
  QTRY_VERIFY_WITH_TIMEOUT(replay.context().snapshot() != nullptr && !replay.controller().busy(), kTimeout);
  QCOMPARE(replay.context().latest().round, rounds);
}

}  // namespace

class UnsavedSessionTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("unsaved_session_test"); }

  void freshSessionClosesWithoutAsking() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    QVERIFY(!window.hasUnsavedSession());  // only the prefill ran: nothing the user did
    ModalAnswerer answerer;
    QVERIFY(window.close());
    QVERIFY(!window.isVisible());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  void cancelKeepsTheWindowAndTheSession() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    window.stepPhaseAction()->trigger();  // one phase past the prefill is enough
    QTRY_VERIFY_WITH_TIMEOUT(window.context().latest().round == 1 && !window.controller().busy(), kTimeout);
    QVERIFY(window.hasUnsavedSession());
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Cancel));
    QVERIFY(!window.close());
    QVERIFY(answerer.allAnswered());
    QVERIFY(window.isVisible());
    QVERIFY(window.hasUnsavedSession());
    QCOMPARE(window.context().latest().round, int64_t{1});
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  void discardCloses() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Discard));
    QVERIFY(window.close());
    QVERIFY(answerer.allAnswered());
    QVERIFY(!window.isVisible());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  void saveWritesTheTraceThenCloses() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("closing.kvtrace"));
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Save));
    answerer.expect(QStringLiteral("QFileDialog"), choosePath(path));
    QVERIFY(!window.close());  // the save runs on the engine thread; the window waits for it
    QVERIFY(answerer.allAnswered());
    QTRY_VERIFY_WITH_TIMEOUT(!window.isVisible(), kTimeout);
    QVERIFY(QFile::exists(path));
    QVERIFY(!window.hasUnsavedSession());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
    expectSavedRounds(path, 2);
  }

  void cancellingTheFileDialogKeepsTheWindow() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Save));
    answerer.expect(QStringLiteral("QFileDialog"), [](QDialog* dialog) { dialog->reject(); });
    QVERIFY(!window.close());
    QVERIFY(answerer.allAnswered());
    QTest::qWait(200);  // nothing is saved, so nothing may close the window later
    QVERIFY(window.isVisible());
    QVERIFY(window.hasUnsavedSession());
  }

  void savedSessionClosesWithoutAskingUntilItRunsAgain() {
    QTemporaryDir dir;
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    window.saveTrace(dir.filePath(QStringLiteral("saved.kvtrace")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.hasUnsavedSession() && !window.controller().busy(), kTimeout);
    stepRound(window);  // new work after the save
    QVERIFY(window.hasUnsavedSession());
    window.saveTrace(dir.filePath(QStringLiteral("saved-again.kvtrace")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.hasUnsavedSession() && !window.controller().busy(), kTimeout);
    ModalAnswerer answerer;
    QVERIFY(window.close());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  void failedSaveSaysWhyAndKeepsTheWindow() {
    QTemporaryDir dir;
    // The file dialog gets "taken"; the window adds ".kvtrace", and a
    // directory by that name is in the way: writing the trace must fail.
    QVERIFY(QDir().mkpath(dir.filePath(QStringLiteral("taken.kvtrace/inside"))));
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Save));
    answerer.expect(QStringLiteral("QFileDialog"), choosePath(dir.filePath(QStringLiteral("taken"))));
    // The error box is window-modal: the answerer meets it too.
    QString why;
    answerer.expect(QStringLiteral("errorDialog"), [&why](QDialog* dialog) {
      why = qobject_cast<QMessageBox*>(dialog)->informativeText();
      dialog->close();
    });
    QVERIFY(!window.close());
    QTRY_VERIFY2_WITH_TIMEOUT(answerer.allAnswered(), qPrintable(answerer.unexpected().join(", ")), 10000);
    QVERIFY2(why.contains(QStringLiteral("taken.kvtrace")), qPrintable(why));
    QVERIFY(window.isVisible());
    QVERIFY(window.hasUnsavedSession());
    // The failure cancelled the close: a later save does not close the window.
    window.saveTrace(dir.filePath(QStringLiteral("later.kvtrace")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.hasUnsavedSession() && !window.controller().busy(), kTimeout);
    QTest::qWait(100);
    QVERIFY(window.isVisible());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  // A new session replaces the recorded one: the same question first.
  void newSessionAsksAndCancelKeepsTheRounds() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Cancel, QStringLiteral("Save the trace before starting a new session?")));
    emit window.sessionPanel()->startRequested(*window.sessionPanel()->sessionSpec());
    QVERIFY(answerer.allAnswered());
    QTest::qWait(200);  // nothing may start behind the cancelled question
    QVERIFY(!window.controller().busy());
    QCOMPARE(window.context().latest().round, int64_t{2});
    QVERIFY(window.hasUnsavedSession());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  void newSessionAfterDiscardStartsOver() {
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Discard, QStringLiteral("Save the trace before starting a new session?")));
    emit window.sessionPanel()->startRequested(*window.sessionPanel()->sessionSpec());
    QVERIFY(answerer.allAnswered());
    QTRY_VERIFY_WITH_TIMEOUT(window.context().latest().round == 0 && !window.controller().busy(), kTimeout);
    QVERIFY(!window.hasUnsavedSession());
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
  }

  // Save first, then the diff: the saved trace holds the session the diff replaced.
  void runDiffSavesFirstThenRuns() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("before-diff.kvtrace"));
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    stepRound(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Save, QStringLiteral("Save the trace before running the diff?")));
    answerer.expect(QStringLiteral("QFileDialog"), choosePath(path));
    emit window.diffPanel()->runDiffRequested();
    QVERIFY(answerer.allAnswered());
    QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(path) && window.context().snapshot()->diff != nullptr && !window.controller().busy(),
                             kTimeout);
    QVERIFY2(answerer.unexpected().isEmpty(), qPrintable(answerer.unexpected().join(", ")));
    expectSavedRounds(path, 3);
  }

  // A failed save runs nothing: the diff does not replace the session.
  void failedSaveRunsNothing() {
    QTemporaryDir dir;
    QVERIFY(QDir().mkpath(dir.filePath(QStringLiteral("taken.kvtrace/inside"))));
    MainWindow window(fixtureOptions());
    waitForSession(window);
    stepRound(window);
    ModalAnswerer answerer;
    answerer.expect(kQuestion, click(QMessageBox::Save, QStringLiteral("Save the trace before running the diff?")));
    answerer.expect(QStringLiteral("QFileDialog"), choosePath(dir.filePath(QStringLiteral("taken"))));
    answerer.expect(QStringLiteral("errorDialog"), [](QDialog* dialog) { dialog->close(); });
    emit window.diffPanel()->runDiffRequested();
    QTRY_VERIFY2_WITH_TIMEOUT(answerer.allAnswered(), qPrintable(answerer.unexpected().join(", ")), 10000);
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller().busy(), kTimeout);
    QTest::qWait(200);
    QVERIFY(window.context().snapshot()->diff == nullptr);
    QCOMPARE(window.context().latest().round, int64_t{1});
    QVERIFY(window.hasUnsavedSession());
  }
};

QTEST_MAIN(UnsavedSessionTest)
#include "unsaved_session_test.moc"
