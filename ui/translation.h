#pragma once
// The app's translations: the tr() strings of ui/ compiled into the library's resources
// (ui/translations/spillway_<lang>.ts → :/i18n/spillway_<lang>.qm).

#include <QLocale>

class QCoreApplication;

namespace spillway::ui {

// Installs the translation for `locale` (the system's by default) from `folder` (the app's
// resources by default) on the application; false when there is none for it (English stays).
bool installTranslation(QCoreApplication& app, const QLocale& locale = QLocale(),
                        const QString& folder = QStringLiteral(":/i18n"));

}  // namespace spillway::ui
