# The model package (storage/package.h): writer, reader, validation, checksums, O_DIRECT reads.
spillway_test(test_package LABELS compress
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_package.cpp
  LIBS spillway_storage nlohmann_json::nlohmann_json)
