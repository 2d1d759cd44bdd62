# Direct I/O reader (storage) and the hardware probe (core/hw).
spillway_test(test_direct_io LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_direct_io.cpp
  LIBS spillway_storage Threads::Threads)
spillway_test(test_probe LABELS runtime TIMEOUT 120
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_probe.cpp
  LIBS spillway_core)
# Every run calibrates (core/hw/calibration.h): injected measurements against the planner.
spillway_test(test_calibration LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_calibration.cpp
  LIBS spillway_core)
