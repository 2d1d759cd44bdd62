#include "translation.h"

#include <QCoreApplication>
#include <QTranslator>

namespace spillway::ui {

bool installTranslation(QCoreApplication& app, const QLocale& locale, const QString& folder)
{
    auto* translator = new QTranslator(&app);
    if (!translator->load(locale, QStringLiteral("spillway"), QStringLiteral("_"), folder)) {
        delete translator;
        return false;
    }
    return QCoreApplication::installTranslator(translator);
}

}  // namespace spillway::ui
