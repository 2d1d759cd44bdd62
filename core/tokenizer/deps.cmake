# Libraries the tokenizers need, for core/CMakeLists.txt to include after spillway_core exists:
# PCRE2 (Debian: libpcre2-dev) runs the byte-level BPE pre-tokenizer regexes with Unicode
# properties (\p{L}, \p{N}), which std::regex cannot.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
target_link_libraries(spillway_core PRIVATE PkgConfig::PCRE2)
