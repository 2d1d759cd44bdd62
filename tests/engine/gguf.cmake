# GGUF reader and writer: the real stories260K.gguf, writer round trips, corrupt files and fuzzing.
spillway_test(test_gguf LABELS engine
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf.cpp
  LIBS spillway_core)
