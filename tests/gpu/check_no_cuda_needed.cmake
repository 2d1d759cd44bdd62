# cmake -DREADELF=<readelf> -DFILES="<exe>|<exe>" -P check_no_cuda_needed.cmake
# Fails when an executable has a NEEDED entry for a CUDA library: such a program would not start
# on a machine without the NVIDIA driver or the CUDA libraries (the backend is a dlopen module).
string(REPLACE "|" ";" FILES "${FILES}")
foreach(file IN LISTS FILES)
  execute_process(COMMAND ${READELF} -d ${file} OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed (${status})")
  endif()
  string(REGEX MATCHALL "NEEDED[^\n]*\\[(libcuda|libcudart|libcublas|libcublasLt|libnvrtc)[^]]*\\]" bad "${dynamic}")
  if(bad)
    message(FATAL_ERROR "${file} links CUDA libraries at load time: ${bad}")
  endif()
  message(STATUS "${file}: no CUDA library among its NEEDED entries")
endforeach()
