# Layer include roots.
#
# Every layer's headers are included by their folder name ("gpu/device.h", "core/model/llama.h").
# A target sees a layer's headers only when it links that layer's target: each layer exports an
# include root of its own, a folder in the build tree holding one symbolic link named after the
# layer. The source tree itself is never on the include path, so an include that goes against
# the arrows of ARCHITECTURE.md (gpu -> core, storage -> gpu, core -> ui, ...) fails to compile.
# tests/layering checks that it does.

set(SPILLWAY_INCLUDE_ROOTS ${CMAKE_BINARY_DIR}/include-roots)

# spillway_include_root(<target> <name> <source-dir> [PUBLIC|INTERFACE])
function(spillway_include_root target name source_dir scope)
  set(root ${SPILLWAY_INCLUDE_ROOTS}/${name})
  spillway_link_folder(${source_dir} ${root}/${name})
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${root}>)
endfunction()

# spillway_link_folder(<source-dir> <link>): <link> made a symbolic link to <source-dir>, replacing
# one that points elsewhere (a folder that moved in the tree since the build folder was made).
function(spillway_link_folder source_dir link)
  get_filename_component(parent ${link} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(IS_SYMLINK ${link})
    file(READ_SYMLINK ${link} current)
    if(NOT current STREQUAL source_dir)
      file(REMOVE ${link})
    endif()
  endif()
  if(NOT EXISTS ${link})
    file(CREATE_LINK ${source_dir} ${link} SYMBOLIC)
  endif()
endfunction()

# spillway_sources(<var> <dir>...): the .cpp files of the given folders (not recursive).
function(spillway_sources var)
  set(files)
  foreach(dir IN LISTS ARGN)
    file(GLOB found CONFIGURE_DEPENDS ${dir}/*.cpp)
    list(APPEND files ${found})
  endforeach()
  set(${var} ${files} PARENT_SCOPE)
endfunction()

# spillway_isa_flags([DIRECTORY <dir>] <file>...): kernels for newer instruction sets live in files
# named *_avx2.cpp, *_avxvnni.cpp and *_avx512.cpp, compiled for that set only; the rest of the
# binary stays baseline x86-64 and picks kernels at run time. DIRECTORY: the folder whose targets
# compile the files (source properties are per folder), when it is not the calling one.
function(spillway_isa_flags)
  cmake_parse_arguments(ARG "" "DIRECTORY" "" ${ARGN})
  set(scope)
  if(ARG_DIRECTORY)
    set(scope DIRECTORY ${ARG_DIRECTORY})
  endif()
  foreach(src IN LISTS ARG_UNPARSED_ARGUMENTS)
    if(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} ${scope} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(src MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${src} ${scope} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavxvnni")
    elseif(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} ${scope} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
    endif()
  endforeach()
endfunction()
