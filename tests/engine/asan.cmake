# Model files are untrusted input: the GGUF tests and spillway-cli's corrupt-file tests also run
# under AddressSanitizer + UBSan in every build of the suite. Rather than a second build tree,
# the engine's sources are compiled once more with the sanitizers into one library used by
# spillway-cli-asan here and by test_gguf_asan (gguf.cmake) and test_cpu_backend_asan
# (cpu_backend.cmake); CMakeLists.txt includes this file before those, in name order.
# (A build with SPILLWAY_ASAN=ON sanitizes everything.)
if(SPILLWAY_ASAN OR SPILLWAY_TSAN)
  return()
endif()

set(asan_flags -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g)
set(asan_dirs gpu gpu/cpu storage core/formats core/model core/tokenizer core/runtime core/hw core/trace
  core/plan core/compress)
set(asan_sources)
foreach(d IN LISTS asan_dirs)
  file(GLOB found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${d}/*.cpp)
  list(APPEND asan_sources ${found})
endforeach()
# Same per-file instruction-set flags as gpu/CMakeLists.txt and core/CMakeLists.txt (source
# properties are per folder).
foreach(src IN LISTS asan_sources)
  if(src MATCHES "_avx2\\.cpp$")
    set_source_files_properties(${src} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                                PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  elseif(src MATCHES "_avx512\\.cpp$")
    set_source_files_properties(${src} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS
      "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
  endif()
endforeach()

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
  ${SPILLWAY_INCLUDE_ROOTS}/base ${SPILLWAY_INCLUDE_ROOTS}/gpu ${SPILLWAY_INCLUDE_ROOTS}/storage
  ${SPILLWAY_INCLUDE_ROOTS}/core)
target_link_libraries(spillway_engine_asan PUBLIC Threads::Threads ${CMAKE_DL_LIBS}
  PRIVATE nlohmann_json::nlohmann_json PkgConfig::PCRE2 PkgConfig::URING PkgConfig::XXHASH PkgConfig::ZSTD
          PkgConfig::SENTENCEPIECE PkgConfig::OPENBLAS)

file(GLOB cli_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/app/cli/*.cpp)
add_executable(spillway-cli-asan ${cli_sources})
target_link_libraries(spillway-cli-asan PRIVATE spillway_engine_asan CLI11::CLI11
                      nlohmann_json::nlohmann_json)
target_compile_definitions(spillway-cli-asan PRIVATE SPILLWAY_VERSION="${PROJECT_VERSION}"
  SPILLWAY_DEMO_MODEL_BUILD="${PROJECT_SOURCE_DIR}/resources/stories260K.gguf")

# The whole spillway-cli suite again, against the sanitized binary (exit 99/98 on a finding).
spillway_test(test_cli_asan LABELS engine asan SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.cpp)
target_compile_definitions(test_cli_asan PRIVATE SPILLWAY_CLI_NAME="spillway-cli-asan")
add_dependencies(test_cli_asan spillway-cli-asan)
set_tests_properties(test_cli_asan PROPERTIES ENVIRONMENT
  "ASAN_OPTIONS=detect_leaks=1:exitcode=99;UBSAN_OPTIONS=halt_on_error=1:exitcode=98")
