# Compressed weight formats: group quantization, ENDOR bitmap sparse, their CPU kernels.
spillway_test(test_compress_formats LABELS compress
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_compress_formats.cpp LIBS spillway_core)

# bench-compress: sizes, decompression throughput, GEMV speed and zstd on a 4096 x 11008 matrix.
add_executable(bench-compress ${CMAKE_CURRENT_SOURCE_DIR}/bench_compress.cpp)
target_link_libraries(bench-compress PRIVATE spillway_core PkgConfig::ZSTD nlohmann_json::nlohmann_json)
set_target_properties(bench-compress PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
