#pragma once
// Helpers shared by the Qt tests of ui/.

#include <QTest>

// Waits up to timeoutMs for `window` (a ChatWindow) to load its model. A load that fails ends the
// wait at once and fails the test with the window's error line (a missing or unreadable model
// file, an unknown architecture), instead of waiting out the timeout and every wait after it.
#define SPILLWAY_WAIT_FOR_MODEL(window, timeoutMs)                                                   \
    do {                                                                                              \
        QTRY_VERIFY_WITH_TIMEOUT((window).isModelReady() || !(window).errorText().isEmpty(),          \
                                 (timeoutMs));                                                        \
        QVERIFY2((window).isModelReady(),                                                             \
                 qPrintable(QStringLiteral("the model did not load: ") + (window).errorText()));      \
    } while (0)
