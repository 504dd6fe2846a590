#pragma once
// A lesson's rich text reduced to the small subset a lesson needs before any
// Qt text class sees it. A lesson is a file a teacher shares: its text may
// come from anyone, and QTextDocument's HTML import recurses on the markup's
// nesting (5,000 nested tables overflow the stack) and loads whatever an
// <img> names (/dev/zero never ends). The sanitizer is one flat pass over the
// text with an explicit stack of open tags, bounded by kMaxLessonMarkupDepth,
// so no input's depth reaches recursive code.
//
// Kept: the tags of lessonMarkupTags() without attributes, except <a href>
// to an http(s) address; entities; the text. Dropped (their text kept): any
// other tag, attributes, comments, tags nested deeper than the bound. The
// allowed tags are listed in resources/lessons/README.md.
#include <QString>
#include <QStringList>

namespace kvscope::ui {

// Tags open at once, at most (a bundled lesson nests 2: <p><b>).
constexpr int kMaxLessonMarkupDepth = 8;

// The tags a lesson text may use, lower case.
QStringList lessonMarkupTags();

struct SanitizedMarkup {
  QString html;      // safe to hand to QTextDocument / QLabel as rich text
  // What was dropped, one short clause each ("<img> is not allowed"), at
  // most one clause per kind of problem; empty when the text was kept as written.
  QStringList problems;
};

SanitizedMarkup sanitizeLessonMarkup(const QString& text);

}  // namespace kvscope::ui
