# bench-visualizer (not a CTest test): a GenerationWorker decodes a synthetic model on its own
# thread while a live BottleneckView repaints on the GUI thread; prints frames/s, paint-time
# percentiles and event-loop latency against the 30 frames/s target, and writes JSON.
# Included from tests/ui/CMakeLists.txt, where Qt 6 was found.
add_executable(bench-visualizer
  ${CMAKE_CURRENT_LIST_DIR}/bench_visualizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/live_view_bench.cpp)
set_target_properties(bench-visualizer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_link_libraries(bench-visualizer PRIVATE spillway_ui)
