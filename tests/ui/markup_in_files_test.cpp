// Strings from a file are shown as text, never interpreted as markup (issue
// 28): a trace whose model names, prompt and token texts hold HTML opens,
// and no label, tooltip or report renders it (an <img> would make Qt read
// the file it names, an <a> would be a live link).
#include <QAbstractButton>
#include <QLabel>
#include <QTextBrowser>
#include <QtTest>

#include "core/trace/trace_file.h"
#include "tests/ui/ui_test_support.h"

using namespace kvscope;
using namespace kvscope::ui;
using namespace kvscope::ui::testing;

namespace {

const std::string kMarkup = "<img src=\"/dev/zero\"><b>bold</b><a href=\"http://x\">link</a>";

// Markup of ours would be escaped (&lt;img); a raw "<img" or "<a href" means
// a string from the file reached a rich-text widget unescaped.
bool rendersMarkup(const QString& html) {
  return html.contains(QStringLiteral("<img src=\"/dev/zero\"")) || html.contains(QStringLiteral("<a href=\"http://x\""));
}

QStringList offenders(const QWidget& root) {
  QStringList found;
  for (const QLabel* label : root.findChildren<QLabel*>()) {
    const bool rich = label->textFormat() == Qt::RichText ||
                      (label->textFormat() == Qt::AutoText && Qt::mightBeRichText(label->text()));
    if (rich && rendersMarkup(label->text())) found << QStringLiteral("label ") + label->objectName() + ": " + label->text();
    if (rendersMarkup(label->toolTip())) found << QStringLiteral("tooltip of ") + label->objectName();
  }
  for (const QTextBrowser* browser : root.findChildren<QTextBrowser*>()) {
    if (rendersMarkup(browser->toHtml())) found << QStringLiteral("browser ") + browser->objectName();
  }
  for (const QWidget* widget : root.findChildren<QWidget*>()) {
    if (rendersMarkup(widget->toolTip())) found << QStringLiteral("tooltip of ") + widget->objectName();
  }
  return found;
}

// Widgets that do show the file's strings (escaped in rich text, verbatim in
// plain text): the check above is only meaningful when there are some.
int showing(const QWidget& root) {
  int count = 0;
  for (const QLabel* label : root.findChildren<QLabel*>()) {
    if (label->text().contains(QStringLiteral("&lt;img")) ||
        (label->textFormat() == Qt::PlainText && label->text().contains(QStringLiteral("<img")))) {
      ++count;
    }
  }
  for (const QTextBrowser* browser : root.findChildren<QTextBrowser*>()) {
    if (browser->toPlainText().contains(QStringLiteral("<img"))) ++count;
  }
  return count;
}

}  // namespace

class MarkupInFilesTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { useTestSettings("markup_in_files_test"); }

  void traceWithMarkupInEveryFreeTextFieldShowsItAsText() {
    const QString saved = QDir::temp().filePath(QStringLiteral("kvscope-markup-%1.kvtrace").arg(QCoreApplication::applicationPid()));
    {
      MainWindow window(fixtureOptions());
      stepRound(window);
      stepRound(window);
      window.saveTrace(saved);
      QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(saved) && !window.controller().busy(), kTimeout);
    }
    TraceData trace = readTrace(saved.toStdString());
    trace.info["target"]["name"] = kMarkup;
    trace.info["target"]["architecture"] = kMarkup;
    trace.info["drafter"]["description"] = kMarkup;
    trace.info["prompt"] = kMarkup;
    trace.record.fault = kMarkup;
    for (auto& [id, text] : trace.token_text) text = kMarkup;
    writeTrace(saved.toStdString(), trace);

    MainWindowOptions options = fixtureOptions();
    options.load_on_start = false;
    MainWindow window(options);
    window.openTrace(saved);
    QTRY_VERIFY_WITH_TIMEOUT(window.context().snapshot() != nullptr && !window.controller().busy(), kTimeout);
    QCOMPARE(window.context().snapshot()->target_name, kMarkup);
    flush(window);
    window.context().goToRound(1);
    flush(window);
    const QStringList found = offenders(window);
    QVERIFY2(found.isEmpty(), qPrintable(found.join(QStringLiteral("\n"))));
    QVERIFY2(showing(window) >= 2, qPrintable(QString::number(showing(window))));
    QFile::remove(saved);
  }
};

QTEST_MAIN(MarkupInFilesTest)
#include "markup_in_files_test.moc"
