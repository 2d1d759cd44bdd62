# Direct I/O reader (storage) and the hardware probe (core/hw).
spillway_test(test_direct_io LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_direct_io.cpp
  LIBS spillway_storage Threads::Threads)
spillway_test(test_probe LABELS runtime TIMEOUT 120
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_probe.cpp
  LIBS spillway_core)
