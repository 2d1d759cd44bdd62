spillway_test(test_llama LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_llama.cpp LIBS spillway_core)
spillway_test(test_sampler LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sampler.cpp LIBS spillway_core)
spillway_test(test_cli LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.cpp)
add_dependencies(test_cli spillway-cli)
