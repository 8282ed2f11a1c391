# prefixgate_warnings: every target of ours compiles warning-free under -Wall -Wextra -Werror.
add_library(prefixgate_warnings INTERFACE)
target_compile_options(prefixgate_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wpedantic -Wshadow -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Wnull-dereference -Wimplicit-fallthrough>)
