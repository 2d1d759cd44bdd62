# The chat database (storage/chat_db.h): CRUD, versions, catalog, search, export/import.
spillway_test(test_chat_db LABELS storage TIMEOUT 120
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_db.cpp
  LIBS spillway_storage nlohmann_json::nlohmann_json)

# Opening: file mode, migration from a real v1 file, newer schema, corrupt files moved aside,
# and SIGKILL of a writer (chat-db-crash-helper) at random moments.
add_executable(chat-db-crash-helper ${CMAKE_CURRENT_SOURCE_DIR}/chat_db_crash_helper.cpp)
target_link_libraries(chat-db-crash-helper PRIVATE spillway_storage)
set_target_properties(chat-db-crash-helper PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
spillway_test(test_chat_db_open LABELS storage TIMEOUT 120
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_db_open.cpp
  LIBS spillway_storage PkgConfig::SQLITE3)
add_dependencies(test_chat_db_open chat-db-crash-helper)
target_compile_definitions(test_chat_db_open PRIVATE
  CHAT_DB_CRASH_HELPER="$<TARGET_FILE:chat-db-crash-helper>")

# bench-chat-db: 100,000 messages (one commit each, and batched), then FTS search latency.
add_executable(bench-chat-db ${CMAKE_CURRENT_SOURCE_DIR}/bench_chat_db.cpp)
target_link_libraries(bench-chat-db PRIVATE spillway_storage nlohmann_json::nlohmann_json)
set_target_properties(bench-chat-db PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
