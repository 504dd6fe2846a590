#pragma once
// The main window's panels, one row each: the dock's object name and title,
// the id a lesson page names it by, where it goes in each workspace, and how
// it is made. MainWindow makes and docks the panels from this table,
// Workspaces places them from it, and lessons name them by its lesson ids
// (read against lessonPanelNames(); a page's panel is found by
// dockNameOfPanel()). A new panel is one row here (and one Panel value).
//
// The object names are what QSettings' remembered layouts, the tests and the
// lesson runner find a dock by: a row's object name never changes.
#include <QString>
#include <QStringList>
#include <QVector>
#include <optional>

#include "ui/lessons/Lesson.h"

class QWidget;

namespace kvscope::ui {

class AttentionPanel;
class AttentionStepsPanel;
class CompressionPanel;
class DebuggerContext;
class DiffPanel;
class KvCachePanel;
class LessonPanel;
class LogPanel;
class RowHistoryPanel;
class SessionPanel;
class TimelinePanel;
class TokenStripPanel;

enum class Panel {
  Session, Timeline, Tokens, Kv, Attention, AttentionSteps, Diff, Compression, RowHistory, Log, Lessons
};

// A panel's place in one workspace (Workspaces.h):
//   Frame   laid out by the workspace's own arrangement (its splits and sizes,
//           Workspaces.cpp), which names the panel;
//   Stage   a tab of the workspace's main tab group, in `tab` order (Debug:
//           behind Verify Attention; Teach and Capture: behind the KV Cache;
//           Compress: behind Compression);
//   Side    a tab of the side column, in `tab` order (Debug: behind the
//           Session form; Teach: behind the Lessons);
//   Hidden  not part of the workspace: behind the stage, hidden (View > its
//           name shows it there), so a saved arrangement still names it.
struct Place {
  enum class Spot { Frame, Stage, Side, Hidden };
  Spot spot = Spot::Hidden;
  int tab = 0;

  static constexpr Place frame() { return {Spot::Frame, 0}; }
  static constexpr Place stage(int tab) { return {Spot::Stage, tab}; }
  static constexpr Place side(int tab) { return {Spot::Side, tab}; }
  static constexpr Place hidden() { return {Spot::Hidden, 0}; }
};

struct WorkspacePlaces {
  Place debug, teach, compress, capture;
};

// The panels the window talks to, as the factories made them.
struct PanelSet {
  SessionPanel* session = nullptr;
  TimelinePanel* timeline = nullptr;
  TokenStripPanel* tokens = nullptr;
  KvCachePanel* kv = nullptr;
  AttentionPanel* attention = nullptr;
  AttentionStepsPanel* steps = nullptr;
  DiffPanel* diff = nullptr;
  CompressionPanel* compression = nullptr;
  RowHistoryPanel* history = nullptr;
  LogPanel* log = nullptr;
  LessonPanel* lessons = nullptr;
};

struct PanelRow {
  Panel panel;
  const char* object_name;  // the dock's objectName ("kvDock")
  const char* title;        // the dock's title, translated in MainWindow's context
  const char* lesson_id;    // a lesson page's "panel" ("kv"); empty: pages do not outline it
  WorkspacePlaces places;
  // The dock's content over the window's context; records the panel in `made`.
  QWidget* (*make)(DebuggerContext& context, PanelSet& made);
};

// Every panel, in the order the window docks them (and lists them in View).
const QVector<PanelRow>& panelTable();
const PanelRow& panelRow(Panel panel);
QString objectNameOf(Panel panel);

// The panel names a lesson page may outline, and the dock objectName of each
// (empty: no such panel).
QStringList lessonPanelNames();
QString dockNameOfPanel(const QString& lesson_id);

// A lesson file read against this table's lesson ids (ui/lessons/Lesson.h).
std::optional<Lesson> readLesson(const QString& path, LessonError* error);

}  // namespace kvscope::ui
