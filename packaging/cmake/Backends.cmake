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
    # sm_75 (Turing: T4, RTX 20xx; the oldest the device accepts), sm_80 (A100, Ampere desktop
    # cards run it too) and sm_90 (H100) machine code, plus sm_90 PTX that newer GPUs compile at
    # load time. Few architectures keep the build short (CI has 2 cores); set
    # CMAKE_CUDA_ARCHITECTURES to build for others (device creation says when the GPU has no code).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;90")
    endif()
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    find_package(CUDAToolkit REQUIRED)
    if(CCACHE_PROGRAM AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
    endif()
    set(SPILLWAY_HAVE_CUDA ON)
    string(REPLACE ";" "," archs "${CMAKE_CUDA_ARCHITECTURES}")
    string(CONCAT SPILLWAY_CUDA_WHY "built as module lib/libspillway_cuda.so, loaded at run time "
                  "(nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${archs}; static cudart, shared cuBLAS)")
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
    string(CONCAT SPILLWAY_VULKAN_WHY "built as module lib/libspillway_vulkan.so, loaded at run time "
                  "(Vulkan ${Vulkan_VERSION} headers, shaders by ${Vulkan_GLSLC_EXECUTABLE})")
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
