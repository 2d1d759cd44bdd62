# The tiered runtime (placements, budgets, prefetching, SSD reads) and the planner.
spillway_test(test_offload LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_offload.cpp
  LIBS spillway_core)
spillway_test(test_planner LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_planner.cpp
  LIBS spillway_core)
