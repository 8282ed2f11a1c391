# prefixgate_warnings: every target of ours compiles warning-free under -Wall -Wextra -Werror.
add_library(prefixgate_warnings INTERFACE)
target_compile_options(prefixgate_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wpedantic -Wshadow -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Wimplicit-fallthrough>)
# GCC 12 at -O3 reports -Wrestrict inside libstdc++'s own std::string operator+ (GCC bug
# 105329, fixed in GCC 13): a false positive in library code, not ours.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(prefixgate_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
