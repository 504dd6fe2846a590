#include "ui/lessons/LessonMarkup.h"

#include <QRegularExpression>
#include <QVector>

#include <algorithm>

namespace kvscope::ui {

namespace {

// Tags without content: never pushed on the stack of open tags.
bool isVoidTag(const QString& name) { return name == QLatin1String("br") || name == QLatin1String("hr"); }

// One tag as written between '<' and '>': "/b", "p class=x", "br/".
struct Tag {
  bool closing = false;
  QString name;        // lower case, letters and digits only; empty: not a tag
  QString attributes;  // the rest, as written
};

Tag parseTag(const QString& body) {
  Tag tag;
  qsizetype i = 0;
  if (i < body.size() && body[i] == QLatin1Char('/')) {
    tag.closing = true;
    ++i;
  }
  const qsizetype start = i;
  while (i < body.size() && i - start < 32 && (body[i].isLetterOrNumber() && body[i].unicode() < 128)) ++i;
  tag.name = body.mid(start, i - start).toLower();
  tag.attributes = body.mid(i).trimmed();
  if (tag.attributes.endsWith(QLatin1Char('/'))) tag.attributes.chop(1);  // <br/>
  tag.attributes = tag.attributes.trimmed();
  return tag;
}

// The http(s) address of an <a>'s href, escaped for an attribute; empty when
// it has none (a file, a relative path, javascript: ...: QTextBrowser would
// open a file link in place of the lesson).
QString httpHref(const QString& attributes) {
  static const QRegularExpression href(
      QStringLiteral("^href\\s*=\\s*(?:\"([^\"]*)\"|'([^']*)'|([^\\s\"']+))$"), QRegularExpression::CaseInsensitiveOption);
  const QRegularExpressionMatch match = href.match(attributes);
  if (!match.hasMatch()) return {};
  QString url = match.captured(1) + match.captured(2) + match.captured(3);
  url = url.trimmed();
  if (!url.startsWith(QLatin1String("https://"), Qt::CaseInsensitive) &&
      !url.startsWith(QLatin1String("http://"), Qt::CaseInsensitive)) {
    return {};
  }
  return url.toHtmlEscaped();
}

// Length of the entity at `at` ("&amp;", "&#955;", "&#x3bb;"), 0 when the
// '&' starts none: it is then written as "&amp;".
qsizetype entityLength(const QString& text, qsizetype at) {
  static const QRegularExpression entity(QStringLiteral("&(?:[A-Za-z][A-Za-z0-9]{1,15}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});"));
  const QRegularExpressionMatch match =
      entity.match(text, at, QRegularExpression::NormalMatch, QRegularExpression::AnchorAtOffsetMatchOption);
  return match.hasMatch() ? match.capturedLength() : 0;
}

class Sanitizer {
 public:
  explicit Sanitizer(const QString& text) : text_(text) { out_.reserve(text.size()); }

  SanitizedMarkup run() {
    qsizetype i = 0;
    while (i < text_.size()) i = step(i);
    while (!open_.isEmpty()) out_ += QStringLiteral("</%1>").arg(open_.takeLast());
    return {out_, problems()};
  }

 private:
  // Consumes one character, entity, comment or tag at `i`; returns where the next begins.
  qsizetype step(qsizetype i) {
    const QChar c = text_[i];
    if (c == QLatin1Char('&')) {
      const qsizetype length = entityLength(text_, i);
      out_ += length > 0 ? text_.mid(i, length) : QStringLiteral("&amp;");
      return i + std::max<qsizetype>(length, 1);
    }
    if (c == QLatin1Char('>')) {
      out_ += QStringLiteral("&gt;");
      return i + 1;
    }
    if (c != QLatin1Char('<')) {
      out_ += c;
      return i + 1;
    }
    if (text_.mid(i, 4) == QLatin1String("<!--")) {
      const qsizetype end = text_.indexOf(QLatin1String("-->"), i + 4);
      return end < 0 ? text_.size() : end + 3;
    }
    const QChar next = i + 1 < text_.size() ? text_[i + 1] : QChar();
    const bool starts_tag = next.isLetter() || next == QLatin1Char('/') || next == QLatin1Char('!') || next == QLatin1Char('?');
    // Once no '>' is left, no '<' after it can close: one search, not one per '<'.
    const qsizetype end = starts_tag && !no_more_close_ ? text_.indexOf(QLatin1Char('>'), i + 1) : -1;
    if (end < 0) {
      if (starts_tag) no_more_close_ = true;
      out_ += QStringLiteral("&lt;");
      return i + 1;
    }
    tag(parseTag(text_.mid(i + 1, end - i - 1)));
    return end + 1;
  }

  void tag(const Tag& t) {
    if (t.name.isEmpty()) return;  // <!DOCTYPE ...>, <?xml ...?>, </ >
    if (!lessonMarkupTags().contains(t.name)) {
      if (!t.closing && !refused_tags_.contains(t.name) && refused_tags_.size() < 6) refused_tags_ << t.name;
      return;
    }
    if (t.closing) return close(t.name);
    QString opening = t.name;
    if (t.name == QLatin1String("a")) {
      const QString href = httpHref(t.attributes);
      if (href.isEmpty()) {
        refused_link_ = true;
        return;  // its </a> finds no open <a> and is dropped too
      }
      opening += QStringLiteral(" href=\"%1\"").arg(href);
    } else if (!t.attributes.isEmpty()) {
      dropped_attributes_ = true;
    }
    if (isVoidTag(t.name)) {
      out_ += QStringLiteral("<%1>").arg(opening);
      return;
    }
    if (open_.size() >= kMaxLessonMarkupDepth) {
      too_deep_ = true;
      return;
    }
    open_ << t.name;
    out_ += QStringLiteral("<%1>").arg(opening);
  }

  // Closes `name` and whatever was opened inside it and left open; a closing
  // tag of nothing open (or of a tag dropped above) is dropped.
  void close(const QString& name) {
    const qsizetype at = open_.lastIndexOf(name);
    if (at < 0) return;
    while (open_.size() > at) out_ += QStringLiteral("</%1>").arg(open_.takeLast());
  }

  QStringList problems() const {
    QStringList list;
    if (!refused_tags_.isEmpty()) {
      QStringList shown;
      for (const QString& name : refused_tags_) shown << QStringLiteral("<%1>").arg(name);
      list << QStringLiteral("tags a lesson may not use were dropped (%1)").arg(shown.join(QStringLiteral(", ")));
    }
    if (refused_link_) list << QStringLiteral("links to anything but an http(s) address were dropped");
    if (dropped_attributes_) list << QStringLiteral("attributes were dropped (only <a href> takes one)");
    if (too_deep_) {
      list << QStringLiteral("tags nested more than %1 deep were flattened").arg(kMaxLessonMarkupDepth);
    }
    return list;
  }

  const QString& text_;
  QString out_;
  QStringList open_;  // the open tags, innermost last; at most kMaxLessonMarkupDepth
  bool no_more_close_ = false;
  QStringList refused_tags_;
  bool refused_link_ = false;
  bool dropped_attributes_ = false;
  bool too_deep_ = false;
};

}  // namespace

QStringList lessonMarkupTags() {
  static const QStringList tags = {
      QStringLiteral("p"),   QStringLiteral("br"),   QStringLiteral("hr"),  QStringLiteral("b"),
      QStringLiteral("i"),   QStringLiteral("u"),    QStringLiteral("em"),  QStringLiteral("strong"),
      QStringLiteral("code"), QStringLiteral("tt"),  QStringLiteral("pre"), QStringLiteral("sub"),
      QStringLiteral("sup"), QStringLiteral("small"), QStringLiteral("ul"), QStringLiteral("ol"),
      QStringLiteral("li"),  QStringLiteral("blockquote"), QStringLiteral("h3"), QStringLiteral("h4"),
      QStringLiteral("a"),
  };
  return tags;
}

SanitizedMarkup sanitizeLessonMarkup(const QString& text) { return Sanitizer(text).run(); }

}  // namespace kvscope::ui
