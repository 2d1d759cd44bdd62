#pragma once
// Colours that follow the platform palette (light or dark): no hard-coded greys or reds that
// vanish on a dark background.

#include <QColor>
#include <QPalette>
#include <QString>

namespace spillway::ui {

// Whether the palette is a dark one (light text on a dark window).
inline bool isDark(const QPalette& p) { return p.color(QPalette::Window).lightnessF() < 0.5; }
// Secondary text: captions, hints, a message's actions.
inline QColor mutedColor(const QPalette& p) { return p.color(QPalette::PlaceholderText); }
inline QColor errorColor(const QPalette& p) { return isDark(p) ? QColor(0xff, 0x8a, 0x80) : QColor(0xb0, 0x00, 0x20); }
inline QColor noticeColor(const QPalette& p) { return isDark(p) ? QColor(0xff, 0xcc, 0x80) : QColor(0x8a, 0x53, 0x00); }
// The memory tiers' colours in the Tuning view (0 device, 1 RAM, 2 SSD): the visualizer's
// lanes for the same tiers (device compute, host to device, SSD read) in one hue family.
inline QColor tierColor(int tier)
{
    static const QColor colors[] = {QColor(0x2e, 0x7d, 0x32), QColor(0x7b, 0x4f, 0xa3), QColor(0xe0, 0x8a, 0x1e)};
    return colors[tier < 0 ? 0 : tier > 2 ? 2 : tier];
}
// "color: #rrggbb;" for a widget's style sheet.
inline QString colorStyle(const QColor& c) { return QStringLiteral("color: %1;").arg(c.name()); }

}  // namespace spillway::ui
