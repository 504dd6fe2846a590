// The Session panel and the session's options declared once
// (core/decode/session_options.h): a fresh panel holds SessionOptions'
// defaults, every option set on it comes back from it, its inputs are
// bounded by the session's own limits, and options the session would refuse
// are refused by the panel with the core's message.
#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "core/decode/session_options.h"
#include "tests/core/base/session_options_samples.h"
#include "ui/context/DebuggerContext.h"
#include "ui/windows/SessionPanel.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

QString jsonText(const SessionOptions& options) { return QString::fromStdString(sessionOptionsJson(options).dump()); }

}  // namespace

class SessionPanelTest : public QObject {
  Q_OBJECT

 private slots:
  void aFreshPanelHoldsTheSessionDefaults() {
    DebuggerContext context;
    SessionPanel panel(context);
    const auto spec = panel.sessionSpec();
    QVERIFY(spec.has_value());
    QCOMPARE(jsonText(spec->options), jsonText(SessionOptions{}));
    QCOMPARE(QString::fromStdString(spec->prompt), SessionPanel::samplePrompt());
  }

  void everyOptionSetComesBack() {
    DebuggerContext context;
    SessionPanel panel(context);
    panel.setOptions(unusualOptions());
    const auto spec = panel.sessionSpec();
    QVERIFY(spec.has_value());
    QCOMPARE(jsonText(spec->options), jsonText(unusualOptions()));
    panel.setOptions(SessionOptions{});  // and back: nothing sticks from the previous options
    QCOMPARE(jsonText(panel.sessionSpec()->options), jsonText(SessionOptions{}));
  }

  // The batch layout (docs/batching.md, "The padded layout") is one of the
  // options: shown by its picker and read back from it.
  void theBatchLayoutComesBack() {
    DebuggerContext context;
    SessionPanel panel(context);
    auto* picker = panel.findChild<QComboBox*>(QStringLiteral("batchLayout"));
    QVERIFY(picker != nullptr);
    QCOMPARE(picker->currentText(), QStringLiteral("ragged"));
    SessionOptions padded;
    padded.batch_layout = BatchLayout::Padded;
    panel.setOptions(padded);
    QCOMPARE(picker->currentText(), QStringLiteral("padded"));
    QVERIFY(panel.sessionSpec()->options.batch_layout == BatchLayout::Padded);
    padded.cache_layout = StorageLayout{true, 4};  // paged engines do not pad: refused with the session's sentence
    panel.setOptions(padded);
    QString error;
    QVERIFY(!panel.sessionSpec(&error).has_value());
    QVERIFY2(error.contains(QStringLiteral("paged engines do not pad")), qPrintable(error));
  }

  void inputsAreBoundedByTheSessionLimits() {
    DebuggerContext context;
    SessionPanel panel(context);
    int64_t largest = 0;
    for (QSpinBox* box : panel.findChildren<QSpinBox*>()) largest = std::max<int64_t>(largest, box->maximum());
    // The gamma and max-new boxes reach the limits validate() accepts, and no box goes beyond every limit.
    QList<int64_t> maxima;
    for (QSpinBox* box : panel.findChildren<QSpinBox*>()) maxima << box->maximum();
    QVERIFY(maxima.contains(SessionLimits::kMaxGamma));
    QVERIFY(maxima.contains(SessionLimits::kMaxNewTokens));
    QVERIFY(largest <= std::max({SessionLimits::kMaxNewTokens, SessionLimits::kMaxTopK, SessionLimits::kMaxSeed}));
  }

  void optionsTheSessionRefusesAreRefusedWithItsMessage() {
    DebuggerContext context;
    SessionPanel panel(context);
    QSignalSpy started(&panel, &SessionPanel::startRequested);
    QSignalSpy refused(&panel, &SessionPanel::startRefused);
    auto* eviction = panel.findChild<QLineEdit*>(QStringLiteral("eviction"));
    QVERIFY(eviction != nullptr);
    SessionOptions no_cache = SessionOptions{};
    no_cache.use_cache = false;
    no_cache.eviction = parseSessionEviction("h2o:0.5");
    panel.setOptions(no_cache);  // eviction without the cache: validate() refuses the pair
    QString error;
    QVERIFY(!panel.sessionSpec(&error).has_value());
    QVERIFY2(error.contains(QStringLiteral("--evict needs the KV cache on")), qPrintable(error));
    panel.findChild<QPushButton*>(QStringLiteral("startSession"))->click();
    QCOMPARE(started.count(), 0);
    QCOMPARE(refused.count(), 1);
    QVERIFY(refused.front().front().toString().contains(QStringLiteral("KV cache")));
    // A text --evict would refuse is marked as it is typed, with the core's words.
    eviction->setText(QStringLiteral("h2o:lots"));
    QVERIFY2(eviction->property("refusal").toString().contains(QStringLiteral("--evict")),
             qPrintable(eviction->property("refusal").toString()));
    eviction->setText(QStringLiteral("h2o:0.5"));
    QVERIFY(eviction->property("refusal").toString().isEmpty());
  }

  // "one sequence per line": each non-empty line is a prompt of one batch;
  // a batch fault without a batch is refused, saying how to make one.
  void linesBecomeTheSequencesOfABatch() {
    DebuggerContext context;
    SessionPanel panel(context);
    auto* lines = panel.findChild<QCheckBox*>(QStringLiteral("batchLines"));
    auto* prompt = panel.findChild<QPlainTextEdit*>(QStringLiteral("prompt"));
    QVERIFY(lines != nullptr && prompt != nullptr);
    prompt->setPlainText(QStringLiteral("In the beginning\n\nHear, O Israel:\nBlessed is the man\n"));
    QCOMPARE(QString::fromStdString(panel.sessionSpec()->prompt), prompt->toPlainText());  // unticked: one prompt
    QVERIFY(panel.sessionSpec()->more_prompts.empty());
    lines->setChecked(true);
    const auto spec = panel.sessionSpec();
    QVERIFY(spec.has_value());
    QCOMPARE(QString::fromStdString(spec->prompt), QStringLiteral("In the beginning"));
    QCOMPARE(spec->more_prompts.size(), size_t{2});
    QCOMPARE(QString::fromStdString(spec->more_prompts[1]), QStringLiteral("Blessed is the man"));

    SessionOptions batch_fault;
    batch_fault.fault = Fault::UniformAdvance;
    panel.setOptions(batch_fault);
    QVERIFY(panel.sessionSpec().has_value());  // three lines: a batch
    prompt->setPlainText(QStringLiteral("only one line"));
    QString error;
    QVERIFY(!panel.sessionSpec(&error).has_value());
    QVERIFY2(error.contains(QStringLiteral("one sequence per line")), qPrintable(error));
  }
};

QTEST_MAIN(SessionPanelTest)
#include "session_panel_test.moc"
