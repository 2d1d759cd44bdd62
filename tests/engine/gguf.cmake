# GGUF reader and writer: the real stories260K.gguf, writer round trips, corrupt files, truncations
# and fuzzing. Helpers shared by the sources are in gguf_test_util.h.
set(gguf_test_sources
  ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_reader.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_writer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_corrupt.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_fuzz.cpp)
spillway_test_objects(test_gguf_objects SOURCES ${gguf_test_sources} LIBS spillway_core)
spillway_test(test_gguf LABELS engine SOURCES $<TARGET_OBJECTS:test_gguf_objects> LIBS spillway_core)

# Model files are untrusted input: the same tests again under AddressSanitizer + UBSan, in every
# build that has the sanitized engine library (asan.cmake, included before this file).
if(TARGET spillway_engine_asan)
  spillway_test(test_gguf_asan LABELS engine asan
    SOURCES $<TARGET_OBJECTS:test_gguf_objects> LIBS spillway_engine_asan)
endif()
