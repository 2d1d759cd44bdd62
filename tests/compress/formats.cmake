# Compressed weight formats: group quantization, ENDOR bitmap sparse, their CPU kernels.
spillway_test(test_compress_formats LABELS compress
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_compress_formats.cpp LIBS spillway_core)

# bench-compress: sizes, decompression throughput, GEMV speed and zstd on a 4096 x 11008 matrix.
# zstd is the general-purpose compressor the bitmap sparse format is compared with (ENDOR §5.1):
# this benchmark's alone, not linked into anything shipped.
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET GLOBAL libzstd)
add_executable(bench-compress ${CMAKE_CURRENT_SOURCE_DIR}/bench_compress.cpp)
target_link_libraries(bench-compress PRIVATE spillway_core PkgConfig::ZSTD nlohmann_json::nlohmann_json)
set_target_properties(bench-compress PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
