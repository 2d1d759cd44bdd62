# Quality check: KL divergence, top-1 agreement and perplexity of a candidate against its
# reference, on stories260K and noisy copies of it.
spillway_test(test_quality LABELS compress
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quality.cpp
              LIBS spillway_core nlohmann_json::nlohmann_json)
