# cmake -DREADELF=<readelf> -DFILES="<exe>|<exe>" [-DLIBS="libvulkan|..."] [-DWHAT=Vulkan]
#       -P check_no_cuda_needed.cmake
# Fails when an executable has a NEEDED entry for one of LIBS (by default the CUDA libraries):
# such a program would not start on a machine without the NVIDIA driver or the CUDA libraries
# (or, with LIBS=libvulkan, without a Vulkan loader); the GPU backends are dlopen modules.
if(NOT LIBS)
  set(LIBS "libcuda|libcudart|libcublas|libcublasLt|libnvrtc")
endif()
if(NOT WHAT)
  set(WHAT "CUDA")
endif()
string(REPLACE "|" ";" FILES "${FILES}")
foreach(file IN LISTS FILES)
  execute_process(COMMAND ${READELF} -d ${file} OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed (${status})")
  endif()
  string(REGEX MATCHALL "NEEDED[^\n]*\\[(${LIBS})[^]]*\\]" bad "${dynamic}")
  if(bad)
    message(FATAL_ERROR "${file} links ${WHAT} libraries at load time: ${bad}")
  endif()
  message(STATUS "${file}: no ${WHAT} library among its NEEDED entries")
endforeach()
