# ggml's other block types (Q2_K, Q3_K, Q5_1, the IQ types, MXFP4) against ggml's own blocks and
# floats (tests/data/quants): decoders bit for bit, matvec on every kernel set, the IQ grids.
spillway_test(test_quant_types LABELS engine formats quants
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_types.cpp
  LIBS spillway_core OpenSSL::Crypto)
# Whole models in the mixes people download (tests/data/models/quants), quantized by llama.cpp's
# llama-quantize, against llama.cpp's ids and logits on every CPU kernel set.
spillway_test(test_quant_models LABELS engine quants
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_models.cpp
  LIBS spillway_core nlohmann_json::nlohmann_json)
