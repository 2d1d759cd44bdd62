# Pruning: magnitude / Wanda, unstructured and N:M, calibration on stories260K.
spillway_test(test_prune LABELS compress
              SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_prune.cpp LIBS spillway_core)
