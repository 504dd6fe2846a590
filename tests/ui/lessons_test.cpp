// Lessons: every bundled lesson page loads on the bundled models
// (else the fixture pair), sets up the session it names (settings, rounds,
// cursor), outlines its panel, fills its text from the running session and
// leaves nothing unsaved; Page Down / Page Up walk the pages; a malformed
// lesson file gives an error naming the file and the field, in the parser
// and in the window, and never crashes.
#include <QApplication>
#include <QDockWidget>
#include <QFile>
#include <QPushButton>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "tests/ui/ui_test_support.h"
#include "ui/lessons/Lesson.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/widgets/KvHeatmapView.h"
#include "ui/widgets/PanelHighlight.h"
#include "ui/windows/LessonPanel.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

void waitForPage(MainWindow& window) {
  QTRY_VERIFY_WITH_TIMEOUT(window.lessonRunner()->ready() && !window.controller().busy(), kTimeout);
  flush(window);
  window.lessonPanel()->flushRefresh();
}

// What the page asked for is what the window shows.
void checkPage(MainWindow& window, const Lesson& lesson, int index) {
  const LessonPage& page = lesson.pages[index];
  const QString where = QStringLiteral("%1 page %2").arg(lesson.title).arg(index + 1);
  const SessionSnapshot* snapshot = window.context().snapshot();
  QVERIFY2(snapshot != nullptr, qPrintable(where));
  // The session: the page's settings, run as far as it needs.
  const LessonSession session = lesson.sessionOf(index);
  // Every option, as the one declaration writes them (core/decode/session_options.h).
  const auto spec = window.sessionPanel()->sessionSpec();
  QVERIFY2(spec.has_value(), qPrintable(where));
  QCOMPARE(QString::fromStdString(sessionOptionsJson(spec->options).dump()),
           QString::fromStdString(sessionOptionsJson(session.options).dump()));
  QCOMPARE(snapshot->fault, std::string(faultInfo(session.options.fault).name));
  QVERIFY2(snapshot->lastRound() >= page.rounds || snapshot->finished, qPrintable(where));
  QCOMPARE(snapshot->diff != nullptr, session.diff);
  // The cursor: the round asked for (numbers), or a round of the kind asked for.
  const Cursor& cursor = window.context().cursor();
  if (page.cursor.round.front().isDigit()) QCOMPARE(cursor.round, page.cursor.round.toLongLong());
  if (page.cursor.round == QStringLiteral("first-rejection")) {
    const RoundRecord* round = snapshot->round(cursor.round);
    QVERIFY2(round && round->accepted < static_cast<int64_t>(round->drafts.size()), qPrintable(where));
  }
  if (page.cursor.round == QStringLiteral("root-cause")) QCOMPARE(cursor.round, snapshot->diff->root_cause->round);
  // The panel: raised, visible, outlined.
  const QString dock_name = dockNameOfPanel(page.panel);
  QCOMPARE(window.lessonRunner()->highlightedDock(), dock_name);
  QDockWidget* dock = window.dock(dock_name);
  QVERIFY2(dock && dock->isVisible() && dock->widget()->width() > 0 && dock->widget()->height() > 0, qPrintable(where));
  auto* outline = dock->findChild<PanelHighlight*>();
  QVERIFY2(outline && outline->isVisible() && outline->size() == dock->size(), qPrintable(where));
  // The text: every {name} filled from the session.
  const QString text = window.lessonPanel()->pageText();
  QVERIFY2(!text.isEmpty() && !text.contains(QLatin1Char('{')), qPrintable(where + ": " + text));
  // The session had the round the page looks for (no "showing the latest instead" note).
  QVERIFY2(window.lessonPanel()->statusText().isEmpty(), qPrintable(where + ": " + window.lessonPanel()->statusText()));
  // Rounds a lesson stepped are not unsaved work: the next page does not ask.
  QVERIFY2(!window.hasUnsavedSession(), qPrintable(where));
}

QString writeLesson(const QTemporaryDir& dir, const QString& name, const QByteArray& json) {
  const QString path = dir.filePath(name);
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return QString();
  file.write(json);
  return path;
}

}  // namespace

class LessonsTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("lessons_test"); }

  void theSixLessonsAreBundled() {
    const QStringList files = bundledLessonFiles();
    QVERIFY2(files.size() >= 6, qPrintable(files.join(", ")));
    for (const QString& path : files) {
      LessonError error;
      QVERIFY2(readLesson(path, &error).has_value(), qPrintable(error.message));
    }
  }

  void everyPageSetsItsSessionAndHighlightsItsPanel() {
    MainWindowOptions options;  // the bundled pair (else the fixture pair)
    options.restore_layout = false;
    options.size = QSize(1280, 720);
    MainWindow window(options);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    LessonPanel* panel = window.lessonPanel();
    QVERIFY2(panel->errors().isEmpty(), qPrintable(panel->errors().join("\n")));
    QVERIFY(panel->lessons().size() >= 6);
    for (int l = 0; l < panel->lessons().size(); ++l) {
      const Lesson lesson = panel->lessons()[l];
      window.openLesson(l);
      for (int p = 0; p < lesson.pages.size(); ++p) {
        if (p > 0) QTest::keyClick(&window, Qt::Key_PageDown);  // the keyboard, as a presenter's clicker sends it
        QCOMPARE(panel->lessonIndex(), l);
        QCOMPARE(panel->pageIndex(), p);
        waitForPage(window);
        if (QTest::currentTestFailed()) return;
        checkPage(window, lesson, p);
        if (QTest::currentTestFailed()) return;
      }
    }
    // Page Up goes back, and the page is set up again.
    QTest::keyClick(&window, Qt::Key_PageUp);
    const int last = panel->lessons().size() - 1;
    QCOMPARE(panel->pageIndex(), panel->lessons()[last].pages.size() - 2);
    waitForPage(window);
    QVERIFY(errorDialog() == nullptr);
  }

  void pageNumbersComeFromTheSession() {
    // Lesson 3's prune page states the exact bookkeeping with this session's n and gamma.
    MainWindowOptions options;
    options.restore_layout = false;
    MainWindow window(options);
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    int lesson = -1;
    for (int l = 0; l < window.lessonPanel()->lessons().size(); ++l) {
      if (window.lessonPanel()->lessons()[l].file.endsWith("03-one-round.json")) lesson = l;
    }
    QVERIFY(lesson >= 0);
    window.openLesson(lesson, 3);
    waitForPage(window);
    const RoundRecord* round = window.context().snapshot()->round(window.context().cursor().round);
    QVERIFY(round != nullptr);
    const int64_t gamma = static_cast<int64_t>(round->drafts.size());
    const QString text = window.lessonPanel()->pageText();
    QVERIFY2(text.contains(QStringLiteral("gamma - n = %1").arg(gamma - round->accepted)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("gamma - n - 1 = %1").arg(std::max<int64_t>(gamma - round->accepted - 1, 0))),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("L' - 1 = %1").arg(round->start_length + round->accepted)), qPrintable(text));
    // And the KV view shows that many target rows removed this round.
    QCOMPARE(int64_t{window.kvCachePanel()->targetView()->countStatus(RowStatus::WrittenPruned) +
                     window.kvCachePanel()->targetView()->countStatus(RowStatus::Pruned)},
             gamma - round->accepted);
  }

  void malformedLessonsNameTheFileAndField() {
    QTemporaryDir dir;
    const struct {
      const char* name;
      QByteArray json;
      const char* field;
    } cases[] = {
        {"not-json.json", "{\"title\": \"x\", \"pages\": [", "not valid JSON"},
        {"no-pages.json", "{\"title\": \"x\"}", "'pages'"},
        {"bad-phase.json",
         R"({"title": "x", "pages": [{"title": "a", "text": "t"}, {"title": "b", "text": "t", "cursor": {"phase": "verfiy"}}]})",
         "'pages[1].cursor.phase'"},
        {"bad-name.json", R"({"title": "x", "pages": [{"title": "a", "text": "n = {nn}"}]})", "{nn}"},
        {"bad-panel.json", R"({"title": "x", "pages": [{"title": "a", "text": "t", "panel": "kv-cache"}]})",
         "'pages[0].panel'"},
        {"bad-fault.json",
         R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"fault": "prune-shrot"}}]})",
         "'pages[0].session.fault'"},
        {"bad-gamma.json", R"({"title": "x", "pages": [{"title": "a", "text": "t", "session": {"gamma": "4"}}]})",
         "'pages[0].session.gamma'"},
        {"no-text.json", R"({"title": "x", "pages": [{"title": "a"}]})", "'pages[0].text'"},
        {"typo-field.json", R"({"title": "x", "pages": [{"title": "a", "text": "t", "round": 2}]})", "'pages[0].round'"},
    };
    for (const auto& c : cases) {
      const QString path = writeLesson(dir, QString::fromUtf8(c.name), c.json);
      LessonError error;
      QVERIFY2(!readLesson(path, &error).has_value(), c.name);
      QVERIFY2(error.message.contains(path), qPrintable(error.message));
      QVERIFY2(error.message.contains(QString::fromUtf8(c.field)), qPrintable(error.message));
    }
    // A good one reads (the test can tell the two apart).
    LessonError error;
    const QString good = writeLesson(dir, "good.json", R"({"title": "x", "pages": [{"title": "a", "text": "n = {n}"}]})");
    QVERIFY2(readLesson(good, &error).has_value(), qPrintable(error.message));
  }

  // QJsonValue::toInt() reads 2.5 and 1e300 as 0, so a what_if_remove
  // of 1e300 ticked row 0; a key written twice kept one value silently.
  void numbersThatAreNotWholeOrInRangeAreRefusedByField() {
    QTemporaryDir dir;
    const struct {
      const char* name;
      QByteArray page;  // one page's extra fields
      const char* parts[2];
    } cases[] = {
        {"remove-huge.json", R"("what_if_remove": [1e300])", {"'pages[0].what_if_remove[0]'", "got 1e+300"}},
        {"remove-half.json", R"("what_if_remove": [3, 2.5])", {"'pages[0].what_if_remove[1]'", "got 2.5"}},
        {"remove-below.json", R"("what_if_remove": [-2])", {"'pages[0].what_if_remove[0]'", "(or -1: the query's own row)"}},
        {"gamma-half.json", R"("session": {"gamma": 2.5})", {"'pages[0].session.gamma'", "must be an integer in 0..64, got 2.5"}},
        {"seed-huge.json", R"("session": {"seed": 1e300})", {"'pages[0].session.seed'", "got 1e+300"}},
        {"round-huge.json", R"("cursor": {"round": 1e300})", {"'pages[0].cursor.round'", "got 1e+300"}},
        {"position-half.json", R"("cursor": {"position": 0.5})", {"'pages[0].cursor.position'", "got 0.5"}},
        {"layer-huge.json", R"("cursor": {"layer": 1e300})", {"'pages[0].cursor.layer'", "got 1e+300"}},
        {"gamma-twice.json", R"("session": {"gamma": 2, "gamma": 8})", {"duplicate key 'gamma'", "/pages/0/session"}},
    };
    for (const auto& c : cases) {
      const QByteArray json = R"({"title": "x", "pages": [{"title": "a", "text": "t", )" + c.page + "}]}";
      const QString path = writeLesson(dir, QString::fromUtf8(c.name), json);
      LessonError error;
      QVERIFY2(!readLesson(path, &error).has_value(), c.name);
      QVERIFY2(error.message.contains(path), qPrintable(error.message));
      for (const char* part : c.parts) QVERIFY2(error.message.contains(QString::fromUtf8(part)), qPrintable(error.message));
    }
    // The rows a lesson may name still read: the query's own (-1) and whole rows.
    LessonError error;
    const QString good = writeLesson(dir, "good.json",
                                     R"({"title": "x", "pages": [{"title": "a", "text": "t", "what_if_remove": [-1, 0, 7]}]})");
    const auto lesson = readLesson(good, &error);
    QVERIFY2(lesson.has_value(), qPrintable(error.message));
    QCOMPARE(lesson->pages[0].what_if_remove, (QVector<int>{-1, 0, 7}));
  }

  void aMalformedLessonInTheWindowIsAnErrorNotACrash() {
    QTemporaryDir dir;
    const QString path = writeLesson(dir, "broken.json", R"({"title": "x", "pages": [{"title": "a", "text": 3}]})");
    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow window(options);
    const int before = window.lessonPanel()->lessons().size();
    QVERIFY(!window.lessonPanel()->addLessonFile(path));
    QCOMPARE(window.lessonPanel()->lessons().size(), before);
    QVERIFY(window.lessonPanel()->errors().last().contains("'pages[0].text'"));
    // A lessons directory holding it: the window opens and says so.
    qputenv("KVSCOPE_LESSONS_DIR", dir.path().toUtf8());
    MainWindow second(options);
    qunsetenv("KVSCOPE_LESSONS_DIR");
    QTRY_VERIFY(errorDialog() != nullptr);
    QVERIFY(errorDialog()->informativeText().contains("broken.json"));
    QVERIFY(errorDialog()->informativeText().contains("'pages[0].text'"));
    errorDialog()->accept();
  }

  void aLessonAsksBeforeReplacingTheUsersSession() {
    MainWindow window(fixtureOptions());
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    stepRound(window);  // the user's own work
    QVERIFY(window.hasUnsavedSession());
    const SessionSnapshot* before = window.context().snapshot();
    bool asked = false;
    QTimer answer;
    connect(&answer, &QTimer::timeout, this, [&] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box || box->objectName() != "saveFirstDialog") return;
      asked = true;
      box->button(QMessageBox::Cancel)->click();  // keep the session
    });
    answer.start(10);
    window.openLesson(0);
    QTRY_VERIFY(asked);
    answer.stop();
    QTest::qWait(200);
    QCOMPARE(window.context().snapshot(), before);  // nothing replaced
    QVERIFY(window.hasUnsavedSession());
  }
};

QTEST_MAIN(LessonsTest)
#include "lessons_test.moc"
