#pragma once
// Remote endpoints as models (issue 29): a model of an OpenAI-compatible server (Spillway's own
// serve, llama.cpp's server, Ollama, vLLM, a hosted API) is a catalog row of format "endpoint"
// whose path is "URL#model", chatted with through server::OpenAiClient on the inference thread.
//
// Their API keys (EndpointKeys) are held in memory for the session; on disk only when the user
// agreed, in <data folder>/endpoint-keys.json, readable by the user alone (0600), written
// atomically. A key is never part of a path, a description, a log line or an export.

#include <QHash>
#include <QMutex>
#include <QString>
#include <optional>

namespace spillway::ui {

struct EndpointRef {
    QString url;    // the API's base, e.g. http://127.0.0.1:8080/v1
    QString model;  // the id the endpoint lists
};

// "http://host:8080/v1#model", the catalog path of an endpoint's model.
QString endpointPath(const QString& url, const QString& model);
// The endpoint and model of a catalog path, or nothing for a path that is not one (a file).
std::optional<EndpointRef> parseEndpointPath(const QString& path);
// The URL a user typed as an API base: trimmed, without a trailing slash, "/v1" where it names
// no path ("localhost:8080" and "http://localhost:8080/" both become http://localhost:8080/v1);
// empty when it is not an http(s) URL with a host.
QString normalizeEndpointUrl(const QString& typed);
// "127.0.0.1:8080", as the model's description and the visualizer name the machine.
QString endpointHost(const QString& url);

class EndpointKeys {
public:
    // file: where remembered keys live ("": memory only). Read at once; a file others can read is
    // made private again.
    explicit EndpointKeys(QString file = QString());

    QString key(const QString& url) const;  // "" when none
    bool remembered(const QString& url) const;
    // The key for `url` from now on; remember: kept in the file too (else removed from it). An
    // empty key forgets it. Returns "" or why the file could not be written (the key is still
    // held for the session).
    QString set(const QString& url, const QString& key, bool remember);
    QString file() const { return m_file; }

private:
    QString save() const;  // under m_mutex

    mutable QMutex m_mutex;
    QString m_file;
    QHash<QString, QString> m_keys;
    QHash<QString, bool> m_remembered;
};

}  // namespace spillway::ui
