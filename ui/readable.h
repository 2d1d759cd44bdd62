#pragma once
// Numbers as a person reads them: rates and times with 1 to 3 significant digits, in the
// locale's digits and separators ("0.52", "8.7", "43", "430", "10,800"); no "10847.7 tokens/s".

#include <QString>

namespace spillway::ui {

QString readable(double value);

}  // namespace spillway::ui
