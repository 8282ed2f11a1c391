# prefixgate_test_suite: one GoogleTest executable and its ctest entries, declared the same way
# for every suite (CONTRIBUTING.md, "Adding a test suite"). Whatever would make a suite silently
# smaller is a configure error: a glob that matches nothing, a listed source that is missing, an
# EXCLUDE that matches nothing, a library or program that is not a target of this build, labels
# that are not exactly one kind plus known extras.
#
#   prefixgate_test_suite(NAME engine_tests
#     SOURCES engine/*_test.cpp                   # files or globs, relative to tests/
#     EXCLUDE engine/engine_loop_test.cpp         # files a glob matched that another suite owns
#     LINK prefixgate::engine GTest::gmock        # prefixgate_warnings and gtest_main come with it
#     INCLUDES "${PROJECT_SOURCE_DIR}/engine/src" # private headers under test
#     DEFINITIONS PREFIXGATE_DATA_DIR="..."       # compile definitions
#     DEPENDS prefixgate-engine                   # programs the tests start
#     TEST_PREFIX gpu.                            # before each test's name, when another suite
#                                                 # builds the same sources
#     OPTIMIZE                                    # the suite's own code does the heavy work
#                                                 # (reference models, emulated kernels): -O1
#                                                 # in every preset, not -O0 (tests/CMakeLists.txt)
#     LABELS unit)
#
# LABELS: exactly one kind (what the test is) and any of the extras (how CI runs it):
set(PREFIXGATE_TEST_KINDS unit cli server browser gpu)
set(PREFIXGATE_TEST_EXTRAS concurrent process-only asan-skip netns)
#   concurrent    threads ThreadSanitizer must see: scripts/test.sh runs it in its TSan phase,
#                 and the `concurrent_tests` target builds what that phase needs
#   process-only  reaches the servers only as processes named by PREFIXGATE_GATEWAY_BIN and
#                 PREFIXGATE_ENGINE_BIN: the TSan phase runs the release build of the suite
#                 against TSan-built servers (only its DEPENDS join `concurrent_tests`)
#   asan-skip     adds nothing under AddressSanitizer (what it reaches runs there through other
#                 suites): an ASan build does not declare it (a status line says so)
#   netns         needs root and network namespaces (ip netns, veth, tc): skips with the reason
#                 where they are unavailable
# A test that calls GTEST_SKIP() is reported as skipped, not passed (gtest_discover_tests' default).

include(GoogleTest)

if(NOT TARGET concurrent_tests)
  add_custom_target(concurrent_tests)
endif()

# Checks LABELS for prefixgate_test_suite and prefixgate_program_test.
function(prefixgate_check_test_labels name)
  set(kinds "")
  foreach(label IN LISTS ARGN)
    if(label IN_LIST PREFIXGATE_TEST_KINDS)
      list(APPEND kinds ${label})
    elseif(NOT label IN_LIST PREFIXGATE_TEST_EXTRAS)
      message(FATAL_ERROR "${name}: unknown test label '${label}' (kinds: "
        "${PREFIXGATE_TEST_KINDS}; extras: ${PREFIXGATE_TEST_EXTRAS})")
    endif()
  endforeach()
  list(LENGTH kinds count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "${name}: LABELS needs exactly one of ${PREFIXGATE_TEST_KINDS}, "
      "got '${kinds}'")
  endif()
  if("process-only" IN_LIST ARGN AND NOT "concurrent" IN_LIST ARGN)
    message(FATAL_ERROR "${name}: process-only only means something with concurrent")
  endif()
endfunction()

function(prefixgate_require_targets name)
  foreach(target IN LISTS ARGN)
    if(NOT TARGET ${target})
      message(FATAL_ERROR "${name}: '${target}' is not a target of this build")
    endif()
  endforeach()
endfunction()

function(prefixgate_test_suite)
  cmake_parse_arguments(PARSE_ARGV 0 arg "OPTIMIZE"
    "NAME;TEST_PREFIX" "SOURCES;EXCLUDE;LINK;INCLUDES;DEFINITIONS;DEPENDS;LABELS")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "prefixgate_test_suite(NAME ... SOURCES ... LABELS ...): "
      "bad arguments '${arg_UNPARSED_ARGUMENTS}'")
  endif()
  prefixgate_check_test_labels(${arg_NAME} ${arg_LABELS})
  prefixgate_require_targets(${arg_NAME} ${arg_LINK} ${arg_DEPENDS})

  set(sources "")
  foreach(entry IN LISTS arg_SOURCES)
    if(entry MATCHES "[*?]")
      file(GLOB matched CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/${entry}")
      if(NOT matched)
        message(FATAL_ERROR "${arg_NAME}: no file matches tests/${entry}")
      endif()
      list(APPEND sources ${matched})
    elseif(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/${entry}")
      list(APPEND sources "${CMAKE_CURRENT_SOURCE_DIR}/${entry}")
    else()
      message(FATAL_ERROR "${arg_NAME}: tests/${entry} does not exist")
    endif()
  endforeach()
  foreach(entry IN LISTS arg_EXCLUDE)
    set(path "${CMAKE_CURRENT_SOURCE_DIR}/${entry}")
    if(NOT path IN_LIST sources)
      message(FATAL_ERROR "${arg_NAME}: EXCLUDE tests/${entry} matches none of its sources")
    endif()
    list(REMOVE_ITEM sources "${path}")
  endforeach()
  if(NOT sources)
    message(FATAL_ERROR "${arg_NAME}: no sources left")
  endif()

  if("asan-skip" IN_LIST arg_LABELS AND CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*address")
    message(STATUS "${arg_NAME}: not built under AddressSanitizer (label asan-skip)")
    return()
  endif()

  add_executable(${arg_NAME} ${sources})
  target_link_libraries(${arg_NAME} PRIVATE ${arg_LINK} prefixgate_warnings GTest::gtest_main)
  target_include_directories(${arg_NAME} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}" ${arg_INCLUDES})
  if(arg_DEFINITIONS)
    target_compile_definitions(${arg_NAME} PRIVATE ${arg_DEFINITIONS})
  endif()
  if(arg_OPTIMIZE)
    target_compile_options(${arg_NAME} PRIVATE -O1)  # after the directory's -O0: it wins
  endif()
  if(arg_DEPENDS)
    add_dependencies(${arg_NAME} ${arg_DEPENDS})
  endif()
  # Discovery lists the tests when the executable is built. The labels are set by a script ctest
  # reads after that list: gtest_discover_tests' PROPERTIES cannot carry a list of several labels
  # (it flattens "unit;concurrent" into LABELS unit and a stray property name). Test names must
  # be unique across suites for that: set_tests_properties finds tests by name.
  gtest_discover_tests(${arg_NAME} DISCOVERY_TIMEOUT 60 TEST_LIST ${arg_NAME}_TESTS
    TEST_PREFIX "${arg_TEST_PREFIX}")
  set(labels_script "${CMAKE_CURRENT_BINARY_DIR}/${arg_NAME}_labels.cmake")
  file(CONFIGURE OUTPUT "${labels_script}" CONTENT [=[
if(DEFINED @arg_NAME@_TESTS)
  set_tests_properties(${@arg_NAME@_TESTS} PROPERTIES LABELS "@arg_LABELS@")
endif()
]=] @ONLY)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_script}")

  if("concurrent" IN_LIST arg_LABELS)
    if(NOT "process-only" IN_LIST arg_LABELS)
      add_dependencies(concurrent_tests ${arg_NAME})
    endif()
    if(arg_DEPENDS)
      add_dependencies(concurrent_tests ${arg_DEPENDS})
    endif()
  endif()
endfunction()

# A program run once as a test, passing when its output matches PASS_REGULAR_EXPRESSION.
#   prefixgate_program_test(NAME GpuBenchRunsInTheEmulator
#     COMMAND prefixgate-gpu-bench --emu PASS_REGULAR_EXPRESSION "TTFT speedup" LABELS cli)
function(prefixgate_program_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;PASS_REGULAR_EXPRESSION" "COMMAND;LABELS")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_NAME OR NOT arg_COMMAND OR NOT arg_PASS_REGULAR_EXPRESSION)
    message(FATAL_ERROR "prefixgate_program_test(NAME ... COMMAND ... PASS_REGULAR_EXPRESSION ..."
      " LABELS ...): bad arguments '${arg_UNPARSED_ARGUMENTS}'")
  endif()
  prefixgate_check_test_labels(${arg_NAME} ${arg_LABELS})
  list(GET arg_COMMAND 0 program)
  prefixgate_require_targets(${arg_NAME} ${program})
  if("concurrent" IN_LIST arg_LABELS)
    message(FATAL_ERROR "${arg_NAME}: a program test cannot be concurrent (no TSan build of it)")
  endif()
  add_test(NAME ${arg_NAME} COMMAND ${arg_COMMAND})
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "${arg_LABELS}"
    PASS_REGULAR_EXPRESSION "${arg_PASS_REGULAR_EXPRESSION}")
endfunction()
