// Hostile lessons: a lesson is a file a teacher shares, so its rich text may
// come from anyone. Text nesting 5,000 tables overflowed QTextDocument's
// recursive HTML import (SIGSEGV) and <img src="/dev/zero"> made it read
// forever. Lesson text is reduced to a whitelisted, depth-bounded subset by a
// flat pass (ui/lessons/LessonMarkup) before any widget sees it; such lessons
// open within seconds and say what was dropped, and the bundled lessons keep
// every tag they use.
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QtTest>

#include "tests/ui/ui_test_support.h"
#include "ui/lessons/Lesson.h"
#include "ui/lessons/LessonMarkup.h"
#include "ui/lessons/LessonRunner.h"
#include "ui/windows/LessonPanel.h"
#include "ui/windows/PanelTable.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

// A page title is shown as written, never as markup.
const char* const kTitle = "<img src=\"/dev/zero\"><b>a hostile page";

QString nestedTables(int depth) {
  return QStringLiteral("<table><tr><td>").repeated(depth) + QStringLiteral("deep inside") +
         QStringLiteral("</td></tr></table>").repeated(depth);
}

// The deepest nesting of the tags in `html` (a well-formed output of the sanitizer).
int maxDepth(const QString& html) {
  static const QRegularExpression tag(QStringLiteral("<(/?)([a-z0-9]+)[^>]*>"));
  int depth = 0, deepest = 0;
  for (auto it = tag.globalMatch(html); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    if (m.captured(2) == QLatin1String("br") || m.captured(2) == QLatin1String("hr")) continue;
    depth += m.captured(1).isEmpty() ? 1 : -1;
    deepest = std::max(deepest, depth);
  }
  return deepest;
}

QString writeLesson(const QTemporaryDir& dir, const QString& name, const QString& text) {
  QJsonObject page{{"title", kTitle}, {"text", text}};
  const QJsonObject lesson{{"title", name}, {"pages", QJsonArray{page}}};
  const QString path = dir.filePath(name);
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly)) return {};
  file.write(QJsonDocument(lesson).toJson());
  return path;
}

}  // namespace

class HostileLessonTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("hostile_lesson_test"); }

  void deepMarkupIsFlattenedInOnePass() {
    for (const QString& text : {nestedTables(5000), QStringLiteral("<b><i>").repeated(200000) + QStringLiteral("x")}) {
      QElapsedTimer clock;
      clock.start();
      const SanitizedMarkup out = sanitizeLessonMarkup(text);
      QVERIFY2(clock.elapsed() < 3000 * kTimeScale, qPrintable(QString::number(clock.elapsed())));
      QVERIFY(out.html.contains(QStringLiteral("x")) || out.html.contains(QStringLiteral("deep inside")));
      QVERIFY2(maxDepth(out.html) <= kMaxLessonMarkupDepth, qPrintable(QString::number(maxDepth(out.html))));
      QVERIFY(!out.problems.isEmpty());
      // What QTextDocument is given, it takes in moments.
      clock.restart();
      QTextDocument document;
      document.setHtml(out.html);
      QVERIFY(document.toPlainText().contains(QStringLiteral("deep inside")) || document.toPlainText().contains('x'));
      QVERIFY2(clock.elapsed() < 3000 * kTimeScale, qPrintable(QString::number(clock.elapsed())));
    }
    QVERIFY(sanitizeLessonMarkup(nestedTables(5000)).problems.join(' ').contains(QStringLiteral("<table>")));
    QVERIFY(sanitizeLessonMarkup(QStringLiteral("<b>").repeated(20)).problems.join(' ').contains(QStringLiteral("deep")));
  }

  void imagesFileLinksAndAttributesAreDropped() {
    const SanitizedMarkup image = sanitizeLessonMarkup(QStringLiteral("<p>see <img src=\"/dev/zero\"> here</p>"));
    QCOMPARE(image.html, QStringLiteral("<p>see  here</p>"));
    QVERIFY(image.problems.join(' ').contains(QStringLiteral("<img>")));
    const SanitizedMarkup file = sanitizeLessonMarkup(QStringLiteral("<a href=\"file:///etc/passwd\">x</a> <a href='/dev/zero'>y</a>"));
    QCOMPARE(file.html, QStringLiteral("x y"));
    QVERIFY(file.problems.join(' ').contains(QStringLiteral("http(s)")));
    const SanitizedMarkup web = sanitizeLessonMarkup(QStringLiteral("<a href=\"https://example.org/a?b=1&c=2\">x</a>"));
    QCOMPARE(web.html, QStringLiteral("<a href=\"https://example.org/a?b=1&amp;c=2\">x</a>"));
    QVERIFY(web.problems.isEmpty());
    const SanitizedMarkup styled = sanitizeLessonMarkup(QStringLiteral("<p style=\"font-size:900000px\">big</p>"));
    QCOMPARE(styled.html, QStringLiteral("<p>big</p>"));
    QVERIFY(styled.problems.join(' ').contains(QStringLiteral("attributes")));
    // Unclosed tags are closed, stray closing tags and bare '<' '&' are text.
    QCOMPARE(sanitizeLessonMarkup(QStringLiteral("<b>a < b & c</i>")).html, QStringLiteral("<b>a &lt; b &amp; c</b>"));
    QCOMPARE(sanitizeLessonMarkup(QStringLiteral("&lambda; &#955; <!-- note --><br/>")).html,
             QStringLiteral("&lambda; &#955; <br>"));
  }

  // The bundled lessons' markup passes unchanged: their tags are all whitelisted.
  void bundledLessonsRenderUnchanged() {
    const QStringList files = bundledLessonFiles();
    QVERIFY(files.size() >= 6);
    for (const QString& path : files) {
      QFile file(path);
      QVERIFY(file.open(QIODevice::ReadOnly));
      const QJsonArray pages = QJsonDocument::fromJson(file.readAll()).object().value("pages").toArray();
      for (const QJsonValue& page : pages) {
        const QString text = page.toObject().value("text").toString();
        const SanitizedMarkup out = sanitizeLessonMarkup(text);
        QVERIFY2(out.problems.isEmpty(), qPrintable(path + ": " + out.problems.join("; ")));
        QTextDocument original, sanitized;
        original.setHtml(text);
        sanitized.setHtml(out.html);
        QCOMPARE(sanitized.toHtml(), original.toHtml());
      }
    }
  }

  void hostileLessonsOpenAndSayWhatWasDropped() {
    QTemporaryDir dir;
    const QString tables = writeLesson(dir, "tables.json", QStringLiteral("<p>before</p>") + nestedTables(5000));
    const QString image = writeLesson(dir, "image.json", QStringLiteral("<p>a picture: <img src=\"/dev/zero\"> done</p>"));
    MainWindow window(fixtureOptions());
    window.show();
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QVERIFY(window.lessonPanel()->addLessonFile(tables));
    QVERIFY(window.lessonPanel()->addLessonFile(image));
    const int count = static_cast<int>(window.lessonPanel()->lessons().size());
    const struct {
      int index;
      const char* file;
      const char* text;
      const char* problem;
    } cases[] = {{count - 2, "tables.json", "deep inside", "<table>"}, {count - 1, "image.json", "done", "<img>"}};
    for (const auto& c : cases) {
      QElapsedTimer clock;
      clock.start();
      window.openLesson(c.index);
      QTRY_VERIFY_WITH_TIMEOUT(window.lessonRunner()->ready() && !window.controller().busy(), 10000 * kTimeScale);
      flush(window);
      window.lessonPanel()->flushRefresh();
      QApplication::processEvents();
      QVERIFY2(clock.elapsed() < 10000 * kTimeScale, qPrintable(QString::number(clock.elapsed())));
      const QString text = window.lessonPanel()->pageText();
      QVERIFY2(text.contains(QString::fromUtf8(c.text)), qPrintable(text.left(400)));
      // The note names the lesson file, the page and the problem.
      QVERIFY2(text.contains(QString::fromUtf8(c.file)) && text.contains(QStringLiteral("page 1")) &&
                   text.contains(QString::fromUtf8(c.problem)),
               qPrintable(text.left(400)));
      auto* title = window.lessonPanel()->findChild<QLabel*>(QStringLiteral("lessonTitle"));
      QVERIFY(title != nullptr);
      QCOMPARE(title->textFormat(), Qt::PlainText);
      QCOMPARE(title->text(), QString::fromUtf8(kTitle));
    }
  }
};

QTEST_MAIN(HostileLessonTest)
#include "hostile_lesson_test.moc"
