#include "remote_endpoint.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMutexLocker>
#include <QUrl>
#include <sys/stat.h>

#include "storage/atomic_file.h"

namespace spillway::ui {

namespace {
bool isHttp(const QString& s)
{
    return s.startsWith(QLatin1String("http://"), Qt::CaseInsensitive) ||
           s.startsWith(QLatin1String("https://"), Qt::CaseInsensitive);
}
}  // namespace

QString endpointPath(const QString& url, const QString& model) { return url + QLatin1Char('#') + model; }

std::optional<EndpointRef> parseEndpointPath(const QString& path)
{
    if (!isHttp(path)) return std::nullopt;
    const qsizetype hash = path.indexOf(QLatin1Char('#'));
    if (hash <= 0 || hash + 1 >= path.size()) return std::nullopt;
    return EndpointRef{path.left(hash), path.mid(hash + 1)};
}

QString normalizeEndpointUrl(const QString& typed)
{
    QString s = typed.trimmed();
    if (s.isEmpty()) return {};
    if (!s.contains(QLatin1String("://"))) s.prepend(QLatin1String("http://"));
    if (!isHttp(s)) return {};
    const QUrl url(s, QUrl::StrictMode);
    if (!url.isValid() || url.host().isEmpty() || url.hasFragment() || url.hasQuery() || !url.userInfo().isEmpty())
        return {};
    while (s.endsWith(QLatin1Char('/'))) s.chop(1);
    if (url.path().isEmpty() || url.path() == QLatin1String("/")) s += QLatin1String("/v1");
    return s;
}

QString endpointHost(const QString& url)
{
    const QUrl u(url);
    return u.port() > 0 ? QStringLiteral("%1:%2").arg(u.host()).arg(u.port()) : u.host();
}

EndpointKeys::EndpointKeys(QString file) : m_file(std::move(file))
{
    if (m_file.isEmpty()) return;
    QFile f(m_file);
    if (!f.open(QIODevice::ReadOnly)) return;
    // Only the user may read it: a copy restored with other permissions is made private again.
    ::chmod(QFile::encodeName(m_file).constData(), 0600);
    const QJsonObject keys = QJsonDocument::fromJson(f.readAll()).object().value(QLatin1String("keys")).toObject();
    for (auto it = keys.begin(); it != keys.end(); ++it) {
        if (!it.value().isString() || it.value().toString().isEmpty()) continue;
        m_keys.insert(it.key(), it.value().toString());
        m_remembered.insert(it.key(), true);
    }
}

QString EndpointKeys::key(const QString& url) const
{
    QMutexLocker l(&m_mutex);
    return m_keys.value(url);
}

bool EndpointKeys::remembered(const QString& url) const
{
    QMutexLocker l(&m_mutex);
    return m_remembered.value(url);
}

QString EndpointKeys::set(const QString& url, const QString& key, bool remember)
{
    QMutexLocker l(&m_mutex);
    const bool wasRemembered = m_remembered.value(url);
    if (key.isEmpty()) {
        m_keys.remove(url);
        m_remembered.remove(url);
    } else {
        m_keys.insert(url, key);
        m_remembered.insert(url, remember && !m_file.isEmpty());
    }
    const bool nowRemembered = m_remembered.value(url);
    if (!wasRemembered && !nowRemembered) return {};  // the file does not change
    return save();
}

QString EndpointKeys::save() const
{
    QJsonObject keys;
    for (auto it = m_keys.begin(); it != m_keys.end(); ++it)
        if (m_remembered.value(it.key())) keys.insert(it.key(), it.value());
    const QByteArray bytes = QJsonDocument(QJsonObject{{QLatin1String("keys"), keys}}).toJson();
    auto out = storage::AtomicFile::create(QFile::encodeName(m_file).toStdString(), 0600);
    if (!out) return QString::fromStdString(out.error().message);
    if (Status s = out->write(bytes.constData(), size_t(bytes.size())); !s) return QString::fromStdString(s.error().message);
    if (Status s = out->commit(); !s) return QString::fromStdString(s.error().message);
    return {};
}

}  // namespace spillway::ui
