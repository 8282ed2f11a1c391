# prefixgate_warnings: every target of ours compiles warning-free under -Wall -Wextra -Werror.
add_library(prefixgate_warnings INTERFACE)
target_compile_options(prefixgate_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror -Wpedantic -Wshadow -Wnon-virtual-dtor
  -Wold-style-cast -Wcast-align -Wimplicit-fallthrough>)
# GCC 12 false positives in library code, not ours:
#  -Wrestrict inside libstdc++'s std::string operator+ at -O3 (GCC bug 105329);
#  -Wmismatched-new-delete on Boost.Asio's awaitable coroutine frames, whose class-specific
#   operator new/delete pair GCC fails to match once inlined (GCC bug 109224).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(prefixgate_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict -Wno-mismatched-new-delete>)
endif()
# Sanitizer instrumentation makes GCC's -Wmaybe-uninitialized flow analysis report variables
# inside libstdc++ (std::regex, std::function) that are initialized: the sanitizer builds check
# that at run time instead, and the release build keeps the warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=")
  target_compile_options(prefixgate_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()
# Boost.Asio uses std::atomic_thread_fence, which GCC's ThreadSanitizer does not model and warns
# about (-Wtsan); the tsan preset still checks everything else.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
  target_compile_options(prefixgate_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>)
endif()
