# The CPU backend: conformance of every op and kernel set, and a kernel benchmark.
spillway_test(test_cpu_backend LABELS engine
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_backend.cpp
  LIBS spillway_gpu)

# Not a CTest test: prints matvec GB/s per weight type next to the host read bandwidth.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp)
  add_executable(bench_kernels ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp)
  target_link_libraries(bench_kernels PRIVATE spillway_gpu)
  set_target_properties(bench_kernels PROPERTIES OUTPUT_NAME bench-kernels
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()

# The conformance suite again under AddressSanitizer + UBSan, in every build that has the
# sanitized engine library (see asan.cmake).
if(TARGET spillway_engine_asan)
  spillway_test(test_cpu_backend_asan LABELS engine asan
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_backend.cpp
    LIBS spillway_engine_asan)
endif()
