#include "ui/windows/LessonPanel.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "ui/lessons/LessonText.h"

namespace kvscope::ui {

LessonPanel::LessonPanel(DebuggerContext& context, QStringList panels, QWidget* parent)
    : ViewerPanel(context, parent), panels_(std::move(panels)) {
  picker_ = new QComboBox;
  picker_->setObjectName(QStringLiteral("lessonPicker"));
  picker_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  picker_->setMinimumContentsLength(12);
  title_ = new QLabel;
  title_->setObjectName(QStringLiteral("lessonTitle"));
  title_->setWordWrap(true);
  title_->setTextFormat(Qt::PlainText);  // a lesson file's title is text, never markup
  QFont bold = title_->font();
  bold.setBold(true);
  bold.setPointSizeF(bold.pointSizeF() * 1.2);
  title_->setFont(bold);
  text_ = new QTextBrowser;
  text_->setObjectName(QStringLiteral("lessonText"));
  // A lesson's links are http(s) addresses (LessonMarkup keeps no other):
  // they open in the browser, never in place of the lesson.
  text_->setOpenLinks(false);
  connect(text_, &QTextBrowser::anchorClicked, this, [](const QUrl& url) {
    if (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https")) QDesktopServices::openUrl(url);
  });
  text_->setMinimumHeight(80);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("lessonStatus"));
  status_->setWordWrap(true);
  status_->setStyleSheet(QStringLiteral("QLabel { color:#805000; }"));
  previous_ = new QPushButton(tr("\u25c0 Previous"));
  previous_->setObjectName(QStringLiteral("lessonPrevious"));
  previous_->setToolTip(tr("Previous page (Page Up)"));
  next_ = new QPushButton(tr("Next \u25b6"));
  next_->setObjectName(QStringLiteral("lessonNext"));
  next_->setToolTip(tr("Next page (Page Down)"));
  page_label_ = new QLabel;
  page_label_->setObjectName(QStringLiteral("lessonPage"));
  page_label_->setAlignment(Qt::AlignCenter);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(previous_);
  buttons->addWidget(page_label_, 1);
  buttons->addWidget(next_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(picker_);
  layout->addWidget(title_);
  layout->addWidget(text_, 1);
  layout->addWidget(status_);
  layout->addLayout(buttons);

  connect(picker_, &QComboBox::activated, this, [this](int index) { openPage(index, 0); });
  connect(next_, &QPushButton::clicked, this, &LessonPanel::next);
  connect(previous_, &QPushButton::clicked, this, &LessonPanel::previous);
  updateButtons();
}

void LessonPanel::loadBundled() {
  for (const QString& path : bundledLessonFiles()) {
    LessonError error;
    if (std::optional<Lesson> lesson = readLesson(path, panels_, &error)) lessons_ << *lesson;
    else errors_ << error.message;
  }
  if (lessons_.isEmpty() && errors_.isEmpty()) {
    errors_ << tr("no lesson files found; searched: %1").arg(lessonSearchPath().join(QStringLiteral(", ")));
  }
  rebuildPicker();
}

bool LessonPanel::addLessonFile(const QString& path) {
  LessonError error;
  std::optional<Lesson> lesson = readLesson(path, panels_, &error);
  if (!lesson) {
    errors_ << error.message;
    return false;
  }
  lessons_ << *lesson;
  rebuildPicker();
  return true;
}

void LessonPanel::rebuildPicker() {
  const QSignalBlocker block(picker_);
  picker_->clear();
  for (const Lesson& lesson : lessons_) picker_->addItem(lesson.title);
  if (lesson_ >= 0) picker_->setCurrentIndex(lesson_);
  if (lessons_.isEmpty()) text_->setHtml(tr("<p>No lessons could be read.</p><pre>%1</pre>").arg(errors_.join('\n').toHtmlEscaped()));
  else if (lesson_ < 0) {
    text_->setHtml(tr("<p>Choose a lesson above, or press <b>Next</b> to start the first one. Each page sets up the "
                      "session it talks about and outlines the panel to look at.</p>"));
  }
  updateButtons();
}

const Lesson* LessonPanel::currentLesson() const { return lesson_ >= 0 && lesson_ < lessons_.size() ? &lessons_[lesson_] : nullptr; }

const LessonPage* LessonPanel::currentPage() const {
  const Lesson* lesson = currentLesson();
  return lesson && page_ >= 0 && page_ < lesson->pages.size() ? &lesson->pages[page_] : nullptr;
}

void LessonPanel::openPage(int lesson, int page) {
  if (lesson < 0 || lesson >= lessons_.size()) return;
  if (page < 0 || page >= lessons_[lesson].pages.size()) return;
  lesson_ = lesson;
  page_ = page;
  {
    const QSignalBlocker block(picker_);
    picker_->setCurrentIndex(lesson);
  }
  setStatus(QString());
  page_moment_ = Cursor{};
  updateButtons();
  refresh();
  emit pageRequested(lessons_[lesson], page);
}

void LessonPanel::next() {
  if (lesson_ < 0) return openPage(std::max(0, picker_->currentIndex()), 0);
  if (page_ + 1 < lessons_[lesson_].pages.size()) openPage(lesson_, page_ + 1);
  else if (lesson_ + 1 < lessons_.size()) openPage(lesson_ + 1, 0);  // on to the next lesson
}

void LessonPanel::previous() {
  if (lesson_ < 0) return;
  if (page_ > 0) openPage(lesson_, page_ - 1);
  else if (lesson_ > 0) openPage(lesson_ - 1, lessons_[lesson_ - 1].pages.size() - 1);
}

void LessonPanel::setStatus(const QString& status) {
  status_->setText(status);
  status_->setVisible(!status.isEmpty());
}

void LessonPanel::updateButtons() {
  const bool any = !lessons_.isEmpty();
  const bool last = lesson_ >= 0 && page_ + 1 >= lessons_[lesson_].pages.size() && lesson_ + 1 >= lessons_.size();
  next_->setEnabled(any && !last);
  previous_->setEnabled(lesson_ > 0 || page_ > 0);
  page_label_->setText(currentLesson() ? tr("page %1 / %2").arg(page_ + 1).arg(currentLesson()->pages.size()) : QString());
}

QString LessonPanel::pageText() const { return text_->toPlainText(); }
QString LessonPanel::statusText() const { return status_->text(); }

void LessonPanel::refresh() {
  const LessonPage* page = currentPage();
  if (!page) return;
  // The lesson's title is in the picker above: the page's alone leaves the
  // text room on a projector.
  title_->setText(page->title);
  if (!page_moment_.valid()) {
    text_->setHtml(tr("<p><i>Setting up this page\u2026</i></p>"));
    return;
  }
  text_->setHtml(markupNote(*page) + fillLessonText(page->text, context().snapshot(), page_moment_));
}

QString LessonPanel::markupNote(const LessonPage& page) const {
  if (page.text_problems.isEmpty()) return {};
  return tr("<p><i>%1, page %2: the text is shown simplified: %3.</i></p>")
      .arg(QFileInfo(currentLesson()->file).fileName().toHtmlEscaped())
      .arg(page_ + 1)
      .arg(page.text_problems.join(QStringLiteral("; ")).toHtmlEscaped());
}

void LessonPanel::setPageMoment(const Cursor& moment) {
  page_moment_ = moment;
  refresh();
}

}  // namespace kvscope::ui
