#include "ui/windows/FileCheck.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtEndian>

namespace kvscope::ui {

namespace {
// A safetensors header this large would be a foreign or corrupted file: the
// biggest kvscope traces keep theirs well under this.
constexpr quint64 kMaxHeaderBytes = quint64{256} << 20;
}  // namespace

QString openableProblem(const QString& path, OpenableKind kind) {
  const QString what = kind == OpenableKind::Trace ? QStringLiteral("kvscope trace") : QStringLiteral("kvscope capture");
  const QFileInfo info(path);
  if (!info.exists()) return QStringLiteral("%1: no such file").arg(path);
  if (!info.isFile()) return QStringLiteral("%1: not a file").arg(path);
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return QStringLiteral("%1: cannot read: %2").arg(path, file.errorString());
  const QByteArray size_bytes = file.read(8);
  if (size_bytes.size() != 8) return QStringLiteral("%1: not a %2 (too short for a safetensors header)").arg(path, what);
  const quint64 header_size = qFromLittleEndian<quint64>(size_bytes.constData());
  if (header_size < 2 || header_size > kMaxHeaderBytes || header_size > static_cast<quint64>(info.size()) - 8) {
    return QStringLiteral("%1: not a %2 (no safetensors header: it would be %3 bytes in a file of %4)")
        .arg(path, what)
        .arg(header_size)
        .arg(info.size());
  }
  QJsonParseError error{};
  const QJsonDocument header = QJsonDocument::fromJson(file.read(static_cast<qint64>(header_size)), &error);
  if (error.error != QJsonParseError::NoError || !header.isObject()) {
    return QStringLiteral("%1: not a %2 (its safetensors header is not JSON: %3)").arg(path, what, error.errorString());
  }
  const QJsonObject metadata = header.object().value(QStringLiteral("__metadata__")).toObject();
  const QString key = kind == OpenableKind::Trace ? QStringLiteral("kvscope") : QStringLiteral("kvscope_capture");
  if (!metadata.contains(key)) {
    const bool other = metadata.contains(kind == OpenableKind::Trace ? QStringLiteral("kvscope_capture") : QStringLiteral("kvscope"));
    return QStringLiteral("%1: not a %2 (its __metadata__ has no '%3'%4)")
        .arg(path, what, key, other ? QStringLiteral(": it is a ") + (kind == OpenableKind::Trace ? "capture" : "trace")
                                    : QString());
  }
  return {};
}

}  // namespace kvscope::ui
