# Tokenizers: SentencePiece (stories260K's vocabulary) and byte-level BPE (SmolLM2's).
spillway_test(test_tokenizer LABELS engine
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer.cpp
          ${CMAKE_CURRENT_SOURCE_DIR}/test_tokenizer_bpe.cpp
  LIBS spillway_core nlohmann_json::nlohmann_json)
