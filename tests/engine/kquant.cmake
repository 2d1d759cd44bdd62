# ggml's Q4_1, Q5_0, Q4_K, Q5_K, Q6_K and our Q8_G64: CPU matvec / getRow conformance on every
# kernel set, the quantizers, hand-built blocks, GGUF files holding them. Helpers shared by the
# sources are in kquant_test_util.h (with cpu_test_util.h).
spillway_test(test_kquant LABELS engine formats
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kquant_matvec.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/test_kquant_formats.cpp
  LIBS spillway_core)
