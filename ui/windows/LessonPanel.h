#pragma once
// Lessons, a guided walkthrough: pick a lesson (the files of
// resources/lessons, or one opened from disk), read its page, go Next /
// Previous (buttons, Page Down / Page Up). The page's text is filled from the
// running session at the page's moment (LessonText) and shown only once the
// page's state is set up (setPageMoment), so it never describes a screen the
// panels do not show yet, nor the moment the teacher stepped to afterwards.
// Setting the page's session up is the LessonRunner's job; this panel only
// asks (pageRequested).
#include <QVector>

#include "ui/lessons/Lesson.h"
#include "ui/windows/ViewerPanel.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTextBrowser;

namespace kvscope::ui {

class LessonPanel : public ViewerPanel {
  Q_OBJECT
 public:
  // `panels`: the lesson ids a page may outline (the window's panel table).
  LessonPanel(DebuggerContext& context, QStringList panels, QWidget* parent = nullptr);

  // Reads the bundled lesson files; the ones that fail to read are listed in errors().
  void loadBundled();
  // Adds a lesson file (File dialog, a teacher's own). False: errors().last() says why.
  bool addLessonFile(const QString& path);
  const QVector<Lesson>& lessons() const { return lessons_; }
  const QStringList& errors() const { return errors_; }

  int lessonIndex() const { return lesson_; }
  int pageIndex() const { return page_; }
  const Lesson* currentLesson() const;
  const LessonPage* currentPage() const;
  // Opens page `page` of lesson `lesson` (and asks for its session).
  void openPage(int lesson, int page);
  void next();
  void previous();
  // What the runner is doing for this page ("stepping round 2 of 3"), or empty.
  void setStatus(const QString& status);
  // The moment the page's text is bound to (an invalid cursor: the page is
  // being set up, its text is withheld).
  void setPageMoment(const Cursor& moment);

  QString pageText() const;
  QString statusText() const;
  QTextBrowser* textView() const { return text_; }
  QPushButton* nextButton() const { return next_; }
  QPushButton* previousButton() const { return previous_; }
  QComboBox* lessonPicker() const { return picker_; }

 signals:
  void pageRequested(const kvscope::ui::Lesson& lesson, int page);

 protected:
  void refresh() override;
  bool showsSession() const override { return false; }  // used before there is a session

 private:
  void rebuildPicker();
  // A line above the page's text naming the lesson file, the page and what
  // its markup lost (LessonMarkup); empty when nothing was dropped.
  QString markupNote(const LessonPage& page) const;
  void updateButtons();

  QStringList panels_;
  QVector<Lesson> lessons_;
  QStringList errors_;
  Cursor page_moment_;
  int lesson_ = -1;
  int page_ = -1;
  QComboBox* picker_;
  QLabel* title_;
  QTextBrowser* text_;
  QLabel* status_;
  QLabel* page_label_;
  QPushButton* previous_;
  QPushButton* next_;
};

}  // namespace kvscope::ui
