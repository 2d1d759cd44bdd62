# core/trace: span ring (concurrency, wrap-around), Chrome-trace export, bottleneck attribution.
spillway_test(test_trace LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_trace.cpp
  LIBS spillway_core nlohmann_json::nlohmann_json)
