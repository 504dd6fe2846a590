#pragma once
// A lesson: a guided walkthrough read from a JSON data file (resources/lessons),
// so a teacher writes a new one without recompiling. Each page has a short
// text and the state it needs: the session (settings), how far to step it,
// where to put the cursor, the panel it talks about. The text's {names} are
// filled from the running session (LessonText), never hard-coded.
//
// The file format, field by field, is in resources/lessons/README.md.
#include <QString>
#include <QStringList>
#include <QVector>
#include <optional>

#include "core/decode/session_options.h"

namespace kvscope::ui {

// The session a page needs: its prompt and its options; fields the file does
// not name keep SessionOptions' defaults (core/decode/session_options.h).
struct LessonSession {
  QString prompt;               // empty: the sample prompt
  // More prompts decoded together with `prompt`, one sequence each (a batch;
  // docs/batching.md); the file's "prompts" list is prompt, then these.
  QStringList more_prompts;
  SessionOptions options;
  bool diff = false;            // run the cached-vs-uncached diff instead of a plain session
  // Identity: two pages with equal keys share one session (no restart).
  QString key() const;
};

// Where a page puts the cursor once its session has run far enough.
struct LessonCursor {
  // "latest", a round number, "first-rejection" (the first round that rejected
  // a draft), "first-all-accepted" (the first round that accepted every draft),
  // "root-cause" (the diff's root cause; needs "diff": true).
  QString round = QStringLiteral("latest");
  QString phase;     // "prefill", "draft", "verify", "accept", "prune"; empty: the round's last
  // A sequence position, "prompt-last", "first-rejected" (the round's first
  // rejected draft), "first-draft" (the round's first draft), "last"; empty: keep.
  QString position;
  QString cache = QStringLiteral("target");  // "target" or "drafter"
  int layer = 0;
  int head = 0;      // kv head
};

struct LessonPage {
  QString title;
  // Rich text with {names} (LessonText::names()), reduced to the safe subset
  // of LessonMarkup when read: what reaches a widget is never the file's markup.
  QString text;
  // What reducing the file's text dropped ("tags nested more than 8 deep were
  // flattened"), for the panel to say; empty when the text was kept as written.
  QStringList text_problems;
  std::optional<LessonSession> session;  // none: the previous page's session
  // The live session has run at least this many rounds. A page without a
  // session of its own needs at least the previous page's rounds.
  int rounds = 0;
  LessonCursor cursor;  // a page without session or cursor: the previous page's
  QString panel;     // a panel's lesson id (one of the panels the lesson was read against): raised and outlined
  QString step;      // a part of that panel to scroll into view or bring to the front (lessonStepNames(panel)); empty: none
  QVector<int> what_if_remove;  // Attention Step by Step: key rows ticked for "what if" (-1: the query's own row)
};

struct Lesson {
  QString file;      // where it was read from
  QString title;
  QString summary;
  QVector<LessonPage> pages;
  // The session in force on page `index`: its own, else the nearest earlier page's.
  LessonSession sessionOf(int index) const;
};

// Reading a lesson failed: `message` names the file and the field.
struct LessonError {
  QString message;
};

// Parses a lesson file whose pages may outline the panels named `panels`
// (the window's lesson ids: lessonPanelNames() of ui/windows/PanelTable.h,
// which also reads a lesson against them). Returns the lesson, or sets
// *error (never throws).
std::optional<Lesson> readLesson(const QString& path, const QStringList& panels, LessonError* error);
std::optional<Lesson> parseLesson(const QByteArray& json, const QString& file, const QStringList& panels,
                                  LessonError* error);
// The parts of `panel` a page may name as its "step" (Attention Step by Step's cards and its what-if box).
QStringList lessonStepNames(const QString& panel);

// Directories searched for lesson files, in order: $KVSCOPE_LESSONS_DIR,
// <exe>/../share/kvscope/lessons, the install data dir, the source tree's resources/lessons.
QStringList lessonSearchPath();
// The *.json lesson files of the first directory on the search path that has any, sorted by name.
QStringList bundledLessonFiles();

}  // namespace kvscope::ui
