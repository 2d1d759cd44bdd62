# Which GPU backends are built. AUTO builds a backend when its toolkit is found and says why
# not otherwise; ON without the toolkit is a configure error; OFF skips it. The build never
# breaks on a machine without CUDA or Vulkan.

set(SPILLWAY_BACKEND_SUMMARY "cpu: built (always)")

# CUDA: CMake 3.25 finds nvcc only through PATH or CUDACXX, so look in the usual place too.
set(SPILLWAY_HAVE_CUDA OFF)
if(NOT SPILLWAY_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(SPILLWAY_NVCC nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(SPILLWAY_NVCC)
      set(CMAKE_CUDA_COMPILER ${SPILLWAY_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SPILLWAY_HAVE_CUDA ON)
    set(SPILLWAY_CUDA_WHY "toolkit found (${CMAKE_CUDA_COMPILER}); not built yet: the CUDA backend module lands with issue 8")
  elseif(SPILLWAY_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_CUDA=ON but no CUDA compiler (nvcc) was found. "
                        "Install the CUDA Toolkit or set SPILLWAY_CUDA=AUTO/OFF.")
  else()
    set(SPILLWAY_CUDA_WHY "not built: no nvcc in PATH or /usr/local/cuda/bin")
  endif()
else()
  set(SPILLWAY_CUDA_WHY "not built: SPILLWAY_CUDA=OFF")
endif()

set(SPILLWAY_HAVE_VULKAN OFF)
if(NOT SPILLWAY_VULKAN STREQUAL "OFF")
  find_package(Vulkan QUIET COMPONENTS glslc)
  if(Vulkan_FOUND AND TARGET Vulkan::glslc)
    set(SPILLWAY_HAVE_VULKAN ON)
    set(SPILLWAY_VULKAN_WHY "SDK found; not built yet: the Vulkan backend lands with issue 8")
  elseif(SPILLWAY_VULKAN STREQUAL "ON")
    message(FATAL_ERROR "SPILLWAY_VULKAN=ON but the Vulkan headers/loader or glslc were not found "
                        "(Debian: libvulkan-dev glslc). Set SPILLWAY_VULKAN=AUTO/OFF.")
  else()
    set(SPILLWAY_VULKAN_WHY "not built: Vulkan SDK or glslc not found (Debian: libvulkan-dev glslc)")
  endif()
else()
  set(SPILLWAY_VULKAN_WHY "not built: SPILLWAY_VULKAN=OFF")
endif()

set(SPILLWAY_BACKEND_SUMMARY "${SPILLWAY_BACKEND_SUMMARY}\n--     cuda: ${SPILLWAY_CUDA_WHY}\n--     vulkan: ${SPILLWAY_VULKAN_WHY}")
