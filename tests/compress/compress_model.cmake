# One-click compression (core/compress/compress_model) and the runtime reading model packages.
spillway_test(test_compress_model LABELS compress
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_compress_model.cpp
              LIBS spillway_core nlohmann_json::nlohmann_json)
