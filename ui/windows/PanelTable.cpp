#include "ui/windows/PanelTable.h"

#include <QCoreApplication>
#include <QScrollArea>

#include "ui/windows/AttentionPanel.h"
#include "ui/windows/AttentionStepsPanel.h"
#include "ui/windows/CompressionPanel.h"
#include "ui/windows/DiffPanel.h"
#include "ui/windows/KvCachePanel.h"
#include "ui/windows/LessonPanel.h"
#include "ui/windows/LogPanel.h"
#include "ui/windows/RowHistoryPanel.h"
#include "ui/windows/SessionPanel.h"
#include "ui/windows/TimelinePanel.h"
#include "ui/windows/TokenStripPanel.h"

namespace kvscope::ui {

namespace {

using P = Place;

QWidget* makeSession(DebuggerContext& context, PanelSet& made) {
  made.session = new SessionPanel(context);
  auto* scroll = new QScrollArea;  // the form is tall: let it scroll on small screens
  scroll->setWidget(made.session);
  scroll->setWidgetResizable(true);
  // Never cut on the right: a dock narrower than the form scrolls instead
  // of hiding the Browse buttons and the replay box's end.
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  scroll->setFrameShape(QFrame::NoFrame);
  return scroll;
}

QWidget* makeLessons(DebuggerContext& context, PanelSet& made) {
  made.lessons = new LessonPanel(context, lessonPanelNames());
  made.lessons->loadBundled();
  return made.lessons;
}

// Places, in the columns' order: Debug, Teach, Compress, Capture.
const QVector<PanelRow> kPanels = {
    {Panel::Session, "sessionDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Session"), "session",
     {P::frame(), P::side(1), P::frame(), P::frame()}, makeSession},
    {Panel::Timeline, "timelineDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Round Timeline"), "timeline",
     {P::frame(), P::side(2), P::hidden(), P::frame()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.timeline = new TimelinePanel(c); }},
    {Panel::Tokens, "tokensDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Tokens"), "tokens",
     {P::frame(), P::stage(3), P::stage(4), P::stage(2)},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.tokens = new TokenStripPanel(c); }},
    {Panel::Kv, "kvDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "KV Cache"), "kv",
     {P::frame(), P::frame(), P::stage(1), P::frame()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.kv = new KvCachePanel(c); }},
    {Panel::Attention, "attentionDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Verify Attention"), "attention",
     {P::frame(), P::stage(1), P::stage(2), P::stage(1)},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.attention = new AttentionPanel(c); }},
    {Panel::AttentionSteps, "attentionStepsDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Attention Step by Step"),
     "attention-steps", {P::stage(1), P::stage(2), P::hidden(), P::hidden()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.steps = new AttentionStepsPanel(c); }},
    {Panel::Diff, "diffDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Cache Diff"), "diff",
     {P::stage(2), P::stage(4), P::hidden(), P::frame()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.diff = new DiffPanel(c); }},
    {Panel::Compression, "compressionDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Compression"), "",
     {P::stage(3), P::hidden(), P::frame(), P::hidden()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.compression = new CompressionPanel(c); }},
    {Panel::RowHistory, "rowHistoryDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Row History"), "row-history",
     {P::frame(), P::stage(5), P::stage(3), P::frame()},
     [](DebuggerContext& c, PanelSet& made) -> QWidget* { return made.history = new RowHistoryPanel(c); }},
    {Panel::Log, "logDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Log"), "log",
     {P::stage(4), P::hidden(), P::frame(), P::stage(3)},
     [](DebuggerContext&, PanelSet& made) -> QWidget* { return made.log = new LogPanel; }},
    {Panel::Lessons, "lessonsDock", QT_TRANSLATE_NOOP("kvscope::ui::MainWindow", "Lessons"), "",
     {P::side(1), P::frame(), P::hidden(), P::hidden()}, makeLessons},
};

}  // namespace

const QVector<PanelRow>& panelTable() { return kPanels; }

const PanelRow& panelRow(Panel panel) {
  for (const PanelRow& row : kPanels) {
    if (row.panel == panel) return row;
  }
  Q_UNREACHABLE();  // every Panel has its row
}

QString objectNameOf(Panel panel) { return QString::fromLatin1(panelRow(panel).object_name); }

QStringList lessonPanelNames() {
  QStringList names;
  for (const PanelRow& row : kPanels) {
    if (*row.lesson_id) names << QString::fromLatin1(row.lesson_id);
  }
  return names;
}

QString dockNameOfPanel(const QString& lesson_id) {
  for (const PanelRow& row : kPanels) {
    if (*row.lesson_id && lesson_id == QLatin1String(row.lesson_id)) return QString::fromLatin1(row.object_name);
  }
  return {};
}

std::optional<Lesson> readLesson(const QString& path, LessonError* error) {
  return readLesson(path, lessonPanelNames(), error);
}

}  // namespace kvscope::ui
