spillway_test(test_llama LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_llama.cpp LIBS spillway_core)
spillway_test(test_sampler LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sampler.cpp LIBS spillway_core)
spillway_test(test_cli LABELS engine SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.cpp)
add_dependencies(test_cli spillway-cli)
# The whole spillway-cli suite again, the same test program against the sanitized binary
# (asan.cmake; exit 99/98 on a finding).
if(TARGET spillway-cli-asan)
  add_dependencies(test_cli spillway-cli-asan)
  add_test(NAME test_cli_asan COMMAND test_cli)
  set_tests_properties(test_cli_asan PROPERTIES LABELS "engine;asan" TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT
    "SPILLWAY_CLI_NAME=spillway-cli-asan;ASAN_OPTIONS=detect_leaks=1:exitcode=99;UBSAN_OPTIONS=halt_on_error=1:exitcode=98")
endif()
spillway_test(test_llama2c LABELS engine formats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_llama2c.cpp LIBS spillway_core)
spillway_test(test_convert LABELS engine formats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_convert.cpp LIBS spillway_core)
spillway_test(test_opt LABELS engine formats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_opt.cpp LIBS spillway_core)
spillway_test(test_hf_archs LABELS engine formats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_hf_archs.cpp LIBS spillway_core)
spillway_test(test_conversation LABELS engine conversation SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_conversation.cpp LIBS spillway_core)
spillway_test(test_engine_fallbacks LABELS engine conversation SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_engine_fallbacks.cpp LIBS spillway_core)
add_dependencies(test_engine_fallbacks spillway-cli)
spillway_test(test_moe LABELS engine moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_moe.cpp LIBS spillway_core nlohmann_json::nlohmann_json)
spillway_test(test_moe_routing LABELS engine moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_moe_routing.cpp LIBS spillway_core)
# The architecture families (core/model/families) against ik_llama.cpp (tests/data/models/families).
spillway_test(test_families LABELS engine families moe SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_families.cpp LIBS spillway_core nlohmann_json::nlohmann_json)
# A reply's parts: reasoning, answer, tool calls (core/engine/reply_parser.h).
spillway_test(test_reply_parser LABELS engine conversation chat SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_reply_parser.cpp LIBS spillway_core)
# Tool calls in each family's syntax, on the families' real chat templates (core/engine/tool_calls.h).
spillway_test(test_tool_calls LABELS engine chat server SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tool_calls.cpp LIBS spillway_core nlohmann_json::nlohmann_json)
# Constrained decoding: JSON Schema grammars, the cached token mask, replies under a schema and a forced call.
spillway_test(test_grammar LABELS engine server SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_grammar.cpp LIBS spillway_core nlohmann_json::nlohmann_json)
