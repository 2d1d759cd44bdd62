# Split GGUF (issue 50): the parts of one model as llama-gguf-split writes them, read as one
# model (every tier and the expert cache give the whole file's tokens), each kind of bad input,
# and convert's split and join. Labels: engine, formats, quants (issue 50's tests).
spillway_test_objects(test_gguf_split_objects SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gguf_split.cpp
  LIBS spillway_core)
spillway_test(test_gguf_split LABELS engine formats quants
  SOURCES $<TARGET_OBJECTS:test_gguf_split_objects> LIBS spillway_core)
# The parts are untrusted input: again under AddressSanitizer + UBSan (asan.cmake).
if(TARGET spillway_engine_asan)
  spillway_test(test_gguf_split_asan LABELS engine formats quants asan
    SOURCES $<TARGET_OBJECTS:test_gguf_split_objects> LIBS spillway_engine_asan)
endif()
