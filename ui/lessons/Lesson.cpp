#include "ui/lessons/Lesson.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QRegularExpression>

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/decode/session_options.h"
#include "core/error.h"
#include "core/model/json_limits.h"
#include "ui/lessons/LessonMarkup.h"
#include "ui/lessons/LessonText.h"

namespace kvscope::ui {

namespace {

// Rounds, positions and rows a lesson may name: far beyond any context
// kvscope runs, and well inside an int.
constexpr int kMaxIndex = 1 << 24;
// The six bundled lessons take 2-4 kB each.
constexpr size_t kMaxLessonBytes = size_t{16} << 20;

const QStringList kPhases = {QStringLiteral("prefill"), QStringLiteral("draft"), QStringLiteral("verify"),
                             QStringLiteral("accept"), QStringLiteral("prune")};

// Field-by-field reading with the error naming the file and the field path
// ("pages[2].cursor.phase"); the first error wins and stops nothing else.
class Reader {
 public:
  Reader(QString file, LessonError* error) : file_(std::move(file)), error_(error) {}
  bool ok() const { return !failed_; }

  void fail(const QString& field, const QString& what) {
    if (failed_) return;
    failed_ = true;
    if (error_) error_->message = QStringLiteral("%1: field '%2': %3").arg(file_, field, what);
  }

  QString string(const QJsonObject& o, const QString& key, const QString& path, const QString& fallback, bool required = false) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) {
      if (required) fail(path + key, QStringLiteral("missing (a string is required)"));
      return fallback;
    }
    if (!v.isString()) {
      fail(path + key, QStringLiteral("must be a string"));
      return fallback;
    }
    return v.toString();
  }

  int integer(const QJsonObject& o, const QString& key, const QString& path, int fallback, int low, int high) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) return fallback;
    const std::optional<int> value = wholeNumber(v, low, high);
    if (!value) {
      fail(path + key, QStringLiteral("must be a whole number in %1..%2, got %3").arg(low).arg(high).arg(shown(v)));
      return fallback;
    }
    return *value;
  }

  // v as an int when it is a JSON number with no fraction in [low, high].
  // Checked in double before any conversion: QJsonValue::toInt() turns 2.5
  // and 1e300 into 0, a cast of 1e300 is undefined, and row 0 is a real row.
  static std::optional<int> wholeNumber(const QJsonValue& v, int low, int high) {
    if (!v.isDouble()) return std::nullopt;
    const double d = v.toDouble();
    if (!(d >= low && d <= high) || d != std::floor(d)) return std::nullopt;
    return static_cast<int>(d);
  }

  // The value as the file wrote it, for messages ("2.5", "1e+300", "\"4\"").
  static QString shown(const QJsonValue& v) {
    if (v.isDouble()) return QString::number(v.toDouble(), 'g', QLocale::FloatingPointShortest);
    if (v.isString()) return QStringLiteral("\"%1\"").arg(v.toString().left(40));
    if (v.isBool()) return v.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    if (v.isNull()) return QStringLiteral("null");
    return v.isArray() ? QStringLiteral("a list") : QStringLiteral("an object");
  }

  bool boolean(const QJsonObject& o, const QString& key, const QString& path, bool fallback) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) return fallback;
    if (!v.isBool()) fail(path + key, QStringLiteral("must be true or false"));
    return v.toBool(fallback);
  }

  // A number or one of `words`, kept as text.
  QString numberOrWord(const QJsonObject& o, const QString& key, const QString& path, const QString& fallback,
                       const QStringList& words) {
    const QJsonValue v = o.value(key);
    if (v.isUndefined()) return fallback;
    if (const auto number = wholeNumber(v, 0, kMaxIndex)) return QString::number(*number);
    if (v.isString() && words.contains(v.toString())) return v.toString();
    fail(path + key, QStringLiteral("must be a whole number in 0..%1 or one of: %2, got %3")
                         .arg(kMaxIndex)
                         .arg(words.join(QStringLiteral(", ")), shown(v)));
    return fallback;
  }

  void unknownKeys(const QJsonObject& o, const QString& path, const QStringList& known) {
    for (const QString& key : o.keys()) {
      if (!known.contains(key)) fail(path + key, QStringLiteral("unknown field (known: %1)").arg(known.join(QStringLiteral(", "))));
    }
  }

  // Every {name} in a text must be one LessonText fills.
  void placeholders(const QString& text, const QString& field) {
    static const QRegularExpression pattern(QStringLiteral("\\{([A-Za-z_][A-Za-z0-9_]*)\\}"));
    const QStringList known = lessonTextNames();
    for (auto it = pattern.globalMatch(text); it.hasNext();) {
      const QString name = it.next().captured(1);
      if (!known.contains(name)) fail(field, QStringLiteral("unknown name {%1} in the text").arg(name));
    }
  }

 private:
  QString file_;
  LessonError* error_;
  bool failed_ = false;
};

// "prompts": a batch's prompts, one sequence each (in place of "prompt").
void readPrompts(Reader& r, const QJsonObject& o, const QString& path, LessonSession& s) {
  if (!o.contains(QStringLiteral("prompts"))) return;
  const QString field = path + QStringLiteral("prompts");
  const QJsonValue v = o.value(QStringLiteral("prompts"));
  const QJsonArray prompts = v.toArray();
  if (!v.isArray() || prompts.size() < 2 || prompts.size() > SessionLimits::kMaxBatch) {
    r.fail(field, QStringLiteral("must be a list of 2 to %1 prompts (one sequence each)").arg(SessionLimits::kMaxBatch));
    return;
  }
  if (o.contains(QStringLiteral("prompt"))) r.fail(field, QStringLiteral("give either prompt or prompts, not both"));
  for (qsizetype i = 0; i < prompts.size(); ++i) {
    if (!prompts[i].isString() || prompts[i].toString().trimmed().isEmpty() || prompts[i].toString().contains(QLatin1Char('\n'))) {
      r.fail(field + QStringLiteral("[%1]").arg(i), QStringLiteral("must be a non-empty one-line text"));
      return;
    }
  }
  s.prompt = prompts[0].toString();
  for (qsizetype i = 1; i < prompts.size(); ++i) s.more_prompts << prompts[i].toString();
}

// A page's session: its prompt, whether it runs the diff, and session
// options named as everywhere else (core/decode/session_options.h: the one
// declaration, its defaults and its limits).
LessonSession readSession(Reader& r, const QJsonObject& o, const QString& path) {
  LessonSession s;
  s.prompt = r.string(o, QStringLiteral("prompt"), path, s.prompt);
  s.diff = r.boolean(o, QStringLiteral("diff"), path, s.diff);
  readPrompts(r, o, path, s);
  QJsonObject options = o;
  options.remove(QStringLiteral("prompt"));
  options.remove(QStringLiteral("prompts"));
  options.remove(QStringLiteral("diff"));
  try {
    const QByteArray text = QJsonDocument(options).toJson(QJsonDocument::Compact);
    s.options = readSessionOptions(nlohmann::json::parse(text.constData(), text.constData() + text.size()));
  } catch (const SessionOptionError& e) {
    // "pages[2].session.gamma"; a combination (adaptive bounds) is the session's.
    const QString field = e.field().empty() ? path.chopped(1) : path + QString::fromStdString(e.field());
    r.fail(field, QString::fromStdString(e.reason()));
  }
  return s;
}

LessonCursor readCursor(Reader& r, const QJsonObject& o, const QString& path) {
  LessonCursor c;
  r.unknownKeys(o, path, {"round", "phase", "position", "cache", "layer", "head"});
  c.round = r.numberOrWord(o, QStringLiteral("round"), path, c.round,
                           {"latest", "first-rejection", "first-all-accepted", "root-cause"});
  c.phase = r.string(o, QStringLiteral("phase"), path, c.phase);
  if (!c.phase.isEmpty() && !kPhases.contains(c.phase)) {
    r.fail(path + QStringLiteral("phase"), QStringLiteral("must be one of: %1").arg(kPhases.join(QStringLiteral(", "))));
  }
  c.position = r.numberOrWord(o, QStringLiteral("position"), path, c.position,
                              {"prompt-last", "first-rejected", "first-draft", "last"});
  c.cache = r.string(o, QStringLiteral("cache"), path, c.cache);
  if (c.cache != QStringLiteral("target") && c.cache != QStringLiteral("drafter")) {
    r.fail(path + QStringLiteral("cache"), QStringLiteral("must be \"target\" or \"drafter\""));
  }
  c.layer = r.integer(o, QStringLiteral("layer"), path, c.layer, 0, 1000);
  c.head = r.integer(o, QStringLiteral("head"), path, c.head, 0, 1000);
  return c;
}

LessonPage readPage(Reader& r, const QJsonObject& o, const QString& path, const QStringList& panels) {
  LessonPage page;
  r.unknownKeys(o, path, {"title", "text", "session", "rounds", "cursor", "panel", "step", "what_if_remove"});
  page.title = r.string(o, QStringLiteral("title"), path, QString(), true);
  const SanitizedMarkup text = sanitizeLessonMarkup(r.string(o, QStringLiteral("text"), path, QString(), true));
  page.text = text.html;
  page.text_problems = text.problems;
  r.placeholders(page.text, path + QStringLiteral("text"));
  if (o.contains(QStringLiteral("session"))) {
    if (!o.value(QStringLiteral("session")).isObject()) r.fail(path + QStringLiteral("session"), QStringLiteral("must be an object"));
    else page.session = readSession(r, o.value(QStringLiteral("session")).toObject(), path + QStringLiteral("session."));
  }
  page.rounds = r.integer(o, QStringLiteral("rounds"), path, 0, 0, 200);
  if (o.contains(QStringLiteral("cursor"))) {
    if (!o.value(QStringLiteral("cursor")).isObject()) r.fail(path + QStringLiteral("cursor"), QStringLiteral("must be an object"));
    else page.cursor = readCursor(r, o.value(QStringLiteral("cursor")).toObject(), path + QStringLiteral("cursor."));
  }
  page.panel = r.string(o, QStringLiteral("panel"), path, QString());
  if (!page.panel.isEmpty() && !panels.contains(page.panel)) {
    r.fail(path + QStringLiteral("panel"),
           QStringLiteral("unknown panel '%1' (known: %2)").arg(page.panel, panels.join(QStringLiteral(", "))));
  }
  page.step = r.string(o, QStringLiteral("step"), path, QString());
  if (!page.step.isEmpty() && !lessonStepNames(page.panel).contains(page.step)) {
    const QStringList known = lessonStepNames(page.panel);
    r.fail(path + QStringLiteral("step"),
           known.isEmpty() ? QStringLiteral("panel '%1' has no steps to scroll to").arg(page.panel)
                           : QStringLiteral("unknown step '%1' of panel '%2' (known: %3)")
                                 .arg(page.step, page.panel, known.join(QStringLiteral(", "))));
  }
  if (o.contains(QStringLiteral("what_if_remove"))) {
    const QJsonValue v = o.value(QStringLiteral("what_if_remove"));
    if (!v.isArray()) r.fail(path + QStringLiteral("what_if_remove"), QStringLiteral("must be a list of key rows"));
    const QJsonArray rows = v.toArray();
    for (qsizetype i = 0; i < rows.size(); ++i) {
      const std::optional<int> row = Reader::wholeNumber(rows[i], -1, kMaxIndex);
      if (!row) {
        r.fail(path + QStringLiteral("what_if_remove[%1]").arg(i),
               QStringLiteral("must be a whole row number in 0..%1 (or -1: the query's own row), got %2")
                   .arg(kMaxIndex)
                   .arg(Reader::shown(rows[i])));
        break;
      }
      page.what_if_remove << *row;
    }
  }
  return page;
}

// A key written twice in one object: QJsonDocument keeps one of the two
// without a word, so a page that says "gamma": 2 and later "gamma": 8 would
// run with whichever it kept. The core's JSON reader names the key and where.
QString repeatedKeyError(const QByteArray& json, const QString& file) {
  static const JsonLimits kLessonLimits{"lesson", kMaxLessonBytes, 64, 1000000, false, true};
  try {
    parseJsonWithLimits(std::string_view(json.constData(), static_cast<size_t>(json.size())), file.toStdString(), kLessonLimits);
  } catch (const Error& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

}  // namespace

QString LessonSession::key() const {
  const std::string options = sessionOptionsJson(this->options).dump();
  return QStringLiteral("%1|%2|%3|%4").arg(prompt, QString::fromStdString(options)).arg(diff).arg(more_prompts.join(QLatin1Char('\n')));
}

LessonSession Lesson::sessionOf(int index) const {
  for (int i = std::min(index, static_cast<int>(pages.size()) - 1); i >= 0; --i) {
    if (pages[i].session) return *pages[i].session;
  }
  return LessonSession{};
}

std::optional<Lesson> parseLesson(const QByteArray& json, const QString& file, const QStringList& panels,
                                  LessonError* error) {
  QJsonParseError parse{};
  const QJsonDocument document = QJsonDocument::fromJson(json, &parse);
  if (parse.error != QJsonParseError::NoError) {
    if (error) error->message = QStringLiteral("%1: not valid JSON at byte %2: %3").arg(file).arg(parse.offset).arg(parse.errorString());
    return std::nullopt;
  }
  if (const QString repeated = repeatedKeyError(json, file); !repeated.isEmpty()) {
    if (error) error->message = repeated;
    return std::nullopt;
  }
  Reader r(file, error);
  if (!document.isObject()) {
    r.fail(QStringLiteral("(top level)"), QStringLiteral("must be an object with \"title\" and \"pages\""));
    return std::nullopt;
  }
  const QJsonObject root = document.object();
  Lesson lesson;
  lesson.file = file;
  r.unknownKeys(root, QString(), {"title", "summary", "pages"});
  lesson.title = r.string(root, QStringLiteral("title"), QString(), QString(), true);
  lesson.summary = r.string(root, QStringLiteral("summary"), QString(), QString());
  const QJsonValue pages = root.value(QStringLiteral("pages"));
  if (!pages.isArray() || pages.toArray().isEmpty()) r.fail(QStringLiteral("pages"), QStringLiteral("must be a non-empty list of pages"));
  const QJsonArray list = pages.toArray();
  for (int i = 0; i < list.size() && r.ok(); ++i) {
    const QString path = QStringLiteral("pages[%1].").arg(i);
    if (!list[i].isObject()) {
      r.fail(QStringLiteral("pages[%1]").arg(i), QStringLiteral("must be an object"));
      break;
    }
    const QJsonObject page = list[i].toObject();
    lesson.pages << readPage(r, page, path, panels);
    // A page that keeps the previous page's session keeps its state too:
    // its rounds (at least) and, unless it names one, its cursor.
    if (i > 0 && !page.contains(QStringLiteral("session"))) {
      LessonPage& current = lesson.pages.back();
      const LessonPage& before = lesson.pages[i - 1];
      current.rounds = std::max(current.rounds, before.rounds);
      if (!page.contains(QStringLiteral("cursor"))) current.cursor = before.cursor;
    }
  }
  if (!r.ok()) return std::nullopt;
  return lesson;
}

std::optional<Lesson> readLesson(const QString& path, const QStringList& panels, LessonError* error) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error) error->message = QStringLiteral("%1: cannot read: %2").arg(path, file.errorString());
    return std::nullopt;
  }
  if (static_cast<size_t>(file.size()) > kMaxLessonBytes) {
    if (error) error->message = QStringLiteral("%1: a lesson of %2 bytes exceeds the limit of %3 bytes").arg(path).arg(file.size()).arg(kMaxLessonBytes);
    return std::nullopt;
  }
  return parseLesson(file.read(static_cast<qint64>(kMaxLessonBytes) + 1), path, panels, error);
}

QStringList lessonStepNames(const QString& panel) {
  if (panel == QStringLiteral("kv")) return {"rows", "pool"};  // the KV Cache panel's tabs
  if (panel != QStringLiteral("attention-steps")) return {};
  return {"hidden", "query", "rotary", "scores", "scaled", "masked", "weights", "output", "projection", "what-if"};
}

QStringList lessonSearchPath() {
  QStringList path;
  if (const QByteArray env = qgetenv("KVSCOPE_LESSONS_DIR"); !env.isEmpty()) path << QString::fromLocal8Bit(env);
  path << QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/../share/kvscope/lessons"));
  path << QStringLiteral(KVSCOPE_INSTALL_DATADIR "/lessons");
  path << QStringLiteral(KVSCOPE_SOURCE_DIR "/resources/lessons");
  return path;
}

QStringList bundledLessonFiles() {
  for (const QString& dir : lessonSearchPath()) {
    const QDir d(dir);
    const QStringList names = d.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name);
    if (names.isEmpty()) continue;
    QStringList files;
    for (const QString& name : names) files << d.absoluteFilePath(name);
    return files;
  }
  return {};
}

}  // namespace kvscope::ui
