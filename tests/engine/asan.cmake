# Model files are untrusted input: the GGUF tests and spillway-cli's corrupt-file tests also run
# under AddressSanitizer + UBSan in every build of the suite. Rather than a second build tree,
# the engine's sources are compiled once more with the sanitizers into one library used by
# spillway-cli-asan here and by test_gguf_asan (gguf.cmake) and test_cpu_backend_asan
# (cpu_backend.cmake); CMakeLists.txt includes this file before those, in name order.
# (A build with SPILLWAY_ASAN=ON sanitizes everything.)
if(SPILLWAY_ASAN OR SPILLWAY_TSAN)
  return()
endif()

# -O0, and UBSan without its vptr check (the dynamic type of every polymorphic access): a third of
# the compile time of -O1 with every check (hf_tokenizer.cpp: 35 s against 98 s), and this
# library was a third of the test build's CPU time. The tests on it run longer (see the README's
# test section for the suite's times).
set(asan_flags -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all
  -fno-omit-frame-pointer -O0 -g)
set(asan_dirs gpu gpu/cpu storage server)
foreach(d IN LISTS SPILLWAY_CORE_DIRS)
  list(APPEND asan_dirs core/${d})
endforeach()
set(asan_sources)
foreach(d IN LISTS asan_dirs)
  file(GLOB found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${d}/*.cpp)
  list(APPEND asan_sources ${found})
endforeach()
# The per-file instruction-set flags of gpu/ and core/ (source properties are per folder).
spillway_isa_flags(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} ${asan_sources})

# Source properties are per folder too: registry.cpp gets the definitions gpu/CMakeLists.txt gives
# it (the backend interface hash; whether the CUDA module was built) copied from there.
set(registry_src ${PROJECT_SOURCE_DIR}/gpu/registry.cpp)
get_source_file_property(registry_defs ${registry_src} DIRECTORY ${PROJECT_SOURCE_DIR}/gpu
                         COMPILE_DEFINITIONS)
if(registry_defs)
  set_source_files_properties(${registry_src} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                              PROPERTIES COMPILE_DEFINITIONS "${registry_defs}")
endif()

add_library(spillway_engine_asan STATIC ${asan_sources})
target_compile_options(spillway_engine_asan PUBLIC ${asan_flags})
target_link_options(spillway_engine_asan PUBLIC -fsanitize=address,undefined)
target_include_directories(spillway_engine_asan PUBLIC
  ${SPILLWAY_INCLUDE_ROOTS}/base ${SPILLWAY_INCLUDE_ROOTS}/gpu_internal ${SPILLWAY_INCLUDE_ROOTS}/storage
  ${SPILLWAY_INCLUDE_ROOTS}/core ${SPILLWAY_INCLUDE_ROOTS}/server)
target_link_libraries(spillway_engine_asan PUBLIC Threads::Threads ${CMAKE_DL_LIBS}
  PRIVATE nlohmann_json::nlohmann_json PkgConfig::PCRE2 PkgConfig::URING PkgConfig::XXHASH
          PkgConfig::SENTENCEPIECE PkgConfig::OPENBLAS PkgConfig::HTTPLIB OpenSSL::Crypto PkgConfig::SQLITE3)

# spillway-cli's own objects (app/CMakeLists.txt) on the sanitized engine: the engine, where
# model files are read and computed on, is instrumented; the argument parsing is not recompiled.
add_executable(spillway-cli-asan $<TARGET_OBJECTS:spillway_cli_objects>)
target_link_libraries(spillway-cli-asan PRIVATE spillway_engine_asan)
# test_cli_asan (model.cmake) runs the whole spillway-cli suite against it.
