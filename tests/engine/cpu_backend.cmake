# The CPU backend: conformance of every op and kernel set, the device's memory accounting, and a
# kernel benchmark. Helpers shared by the test sources are in cpu_test_util.h.
set(cpu_backend_test_sources
  ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_conversions.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_matvec.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_ops.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_delta_net.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_device.cpp)
spillway_test_objects(test_cpu_backend_objects SOURCES ${cpu_backend_test_sources} LIBS spillway_gpu)
spillway_test(test_cpu_backend LABELS engine
  SOURCES $<TARGET_OBJECTS:test_cpu_backend_objects>
  LIBS spillway_gpu)

# Not a CTest test: prints matvec GB/s per weight type next to the host read bandwidth, or (--products)
# the prompt path's matrix products in GOP/s.
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp)
  add_executable(bench_kernels ${CMAKE_CURRENT_SOURCE_DIR}/bench_kernels.cpp)
  target_link_libraries(bench_kernels PRIVATE spillway_gpu spillway_core_formats)
  set_target_properties(bench_kernels PROPERTIES OUTPUT_NAME bench-kernels
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()

# The conformance suite again under AddressSanitizer + UBSan, in every build that has the
# sanitized engine library (asan.cmake, included before this file).
if(TARGET spillway_engine_asan)
  spillway_test(test_cpu_backend_asan LABELS engine asan
    SOURCES $<TARGET_OBJECTS:test_cpu_backend_objects>
    LIBS spillway_engine_asan)
endif()
