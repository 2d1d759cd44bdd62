#include "readable.h"

#include <QLocale>
#include <algorithm>
#include <cmath>

namespace spillway::ui {

QString readable(double value)
{
    const QLocale locale;
    if (!std::isfinite(value)) return QStringLiteral("?");
    if (value < 0) return locale.negativeSign() + readable(-value);
    if (value == 0) return locale.toString(0);
    const int digits = int(std::floor(std::log10(value))) + 1;  // before the point
    if (digits <= 0) return locale.toString(value, 'f', std::min(3, 2 - digits));
    if (digits <= 3) return locale.toString(value, 'f', digits == 1 ? 1 : 0);
    const double unit = std::pow(10.0, digits - 3);
    return locale.toString(qint64(std::llround(value / unit) * qint64(unit)));
}

}  // namespace spillway::ui
