# ggml's other block types (Q2_K, Q3_K, Q5_1, the IQ types, MXFP4) against ggml's own blocks and
# floats (tests/data/quants): decoders bit for bit, matvec on every kernel set, the IQ grids.
spillway_test(test_quant_types LABELS engine formats quants
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_types.cpp ${CMAKE_CURRENT_SOURCE_DIR}/int8_unpack_check_avx2.cpp
  LIBS spillway_core OpenSSL::Crypto)
spillway_isa_flags(${CMAKE_CURRENT_SOURCE_DIR}/int8_unpack_check_avx2.cpp)
# Whole models in the mixes people download (tests/data/models/quants), quantized by llama.cpp's
# llama-quantize, against llama.cpp's ids and logits on every CPU kernel set.
spillway_test(test_quant_models LABELS engine quants
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_models.cpp
  LIBS spillway_core nlohmann_json::nlohmann_json)
# Its Vulkan half (lavapipe in CI, ~3 minutes there) as a test of its own, label vulkan, with the
# module and a runtime folder; the CPU half skips it.
set_property(TEST test_quant_models PROPERTY ENVIRONMENT "GTEST_FILTER=-*OnVulkan*")
add_test(NAME test_quant_models_vulkan COMMAND test_quant_models --gtest_filter=*OnVulkan*)
set_tests_properties(test_quant_models_vulkan PROPERTIES LABELS "vulkan;quants" TIMEOUT 900 SKIP_RETURN_CODE 77
  ENVIRONMENT "XDG_RUNTIME_DIR=${CMAKE_BINARY_DIR}")
if(TARGET spillway_vulkan)
  add_dependencies(test_quant_models spillway_vulkan)
endif()
