# KV cache precision (f32 / f16 / q8): the attention op on converted caches against a double
# reference, the session's cache bytes, logits against f32 on stories260K, the planner's budget.
spillway_test(test_kv_cache LABELS runtime
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kv_cache.cpp
  LIBS spillway_core)
# KvCli.KvTypeFlag runs spillway-cli.
add_dependencies(test_kv_cache spillway-cli)
