# Profile-guided optimization (GCC), driven by scripts/build-pgo.sh: build with
# PREFIXGATE_PGO=generate, run the instrumented gateway through representative traffic
# (tools/prefixgate-bench/pgo_train.sh), then build again in the same folder with
# PREFIXGATE_PGO=use. The counts (*.gcda) are kept beside each object file, which is why both
# builds must share one binary folder (the pgo-generate and pgo presets do: build/pgo).
#
# Why: the gateway's per-request work is short and spread over many functions (HTTP, JSON,
# canonicalization, tokenizers, routing), so it runs cold in the instruction cache and branch
# predictors; the profile lets GCC place hot code together, split cold paths out and inline by
# measured call counts. tools/prefixgate-bench/README.md has the measured difference.
set(PREFIXGATE_PGO "" CACHE STRING "Profile-guided optimization: empty (off), generate or use")
set_property(CACHE PREFIXGATE_PGO PROPERTY STRINGS "" generate use)
if(PREFIXGATE_PGO STREQUAL "")
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(FATAL_ERROR "PREFIXGATE_PGO needs GCC (its -fprofile-generate/-fprofile-use data)")
endif()
if(PREFIXGATE_PGO STREQUAL "generate")
  # Atomic counter updates where the target allows: the gateway counts from several threads.
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fprofile-generate>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fprofile-update=prefer-atomic>)
  add_link_options(-fprofile-generate)
elseif(PREFIXGATE_PGO STREQUAL "use")
  # -fprofile-partial-training: code the training never ran (error paths, other upstream kinds)
  # is optimized as in the release build rather than for size. -Wno-missing-profile: programs
  # other than the gateway have no counts, and need none.
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fprofile-use>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fprofile-partial-training>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-Wno-missing-profile>)
  # Profile-driven inlining moves std::optional members into places where GCC 12's
  # -Wmaybe-uninitialized flow analysis reports them though they are set before use. More
  # generally, GCC's flow-sensitive warnings here depend on the training's counts, which differ
  # from one run to the next: they are printed but do not fail this build. The release build,
  # which CI runs with -Werror, compiles the same source.
  target_compile_options(prefixgate_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized -Wno-error>)
else()
  message(FATAL_ERROR "PREFIXGATE_PGO is '${PREFIXGATE_PGO}': expected empty, generate or use")
endif()
