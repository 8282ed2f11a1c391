# Third-party libraries, all from Debian packages (scripts/install-deps.sh installs them).
if(PREFIXGATE_STATIC)
  # Every find_library from here on (the pkg-config targets, BLAS) takes lib*.a over lib*.so
  # where Debian ships both: libxxhash, libutf8proc, libre2, libopenblas. simdjson and
  # benchmark come as .so only (config packages, unaffected) and are bundled instead.
  list(PREPEND CMAKE_FIND_LIBRARY_SUFFIXES .a)
  set(BLA_STATIC ON)
  # The executables carry the C++ runtime (the host may have no libstdc++, or an older one).
  # Only executables link: the project's own libraries are static.
  add_link_options(-static-libstdc++ -static-libgcc)
  # Bundled .so files sit in ../lib or beside the binary; cuBLAS lives in the CUDA toolkit.
  set(PREFIXGATE_STATIC_RPATH "$ORIGIN/../lib" "$ORIGIN" "/usr/local/cuda/lib64")
  set(CMAKE_BUILD_RPATH ${PREFIXGATE_STATIC_RPATH})
  set(CMAKE_INSTALL_RPATH ${PREFIXGATE_STATIC_RPATH})
  # DT_RPATH, not Debian's default DT_RUNPATH: a RUNPATH is searched only for the binary's own
  # NEEDED entries, and the bundled libsimdjson.so needs libstdc++.so.6 from the bundle too.
  add_link_options(LINKER:--disable-new-dtags)
  # libopenblas.a is partly Fortran (its LAPACK): gfortran's runtime goes on the link line from
  # its archives where GCC ships them (libgfortran-12-dev), so that objects needing it link
  # statically. The engine's cblas_sgemm/sgemv pull in none of them today.
  foreach(lib gfortran quadmath)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=lib${lib}.a
                    OUTPUT_VARIABLE path OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${path}")
      list(APPEND PREFIXGATE_BLAS_RUNTIME "${path}")
    endif()
  endforeach()
endif()

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(simdjson REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
# KV-event streams of vLLM and SGLang (kv_events/): ZeroMQ sockets, msgpack-c++ payloads.
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET GLOBAL libzmq)
find_path(PREFIXGATE_MSGPACK_INCLUDE msgpack.hpp REQUIRED
  DOC "msgpack-c++ headers (scripts/install-deps.sh)")
if(PREFIXGATE_STATIC)
  # libzmq.a would need libsodium, OpenPGM, NORM and Kerberos archives Debian does not all ship:
  # the shared libzmq is linked instead and scripts/gpu-bundle.sh bundles it, like libsimdjson.
  find_library(PREFIXGATE_ZMQ_SHARED NAMES libzmq.so.5 libzmq.so REQUIRED)
  add_library(prefixgate_zmq INTERFACE)
  target_link_libraries(prefixgate_zmq INTERFACE "${PREFIXGATE_ZMQ_SHARED}")
  target_include_directories(prefixgate_zmq INTERFACE ${ZMQ_INCLUDE_DIRS})
else()
  add_library(prefixgate_zmq INTERFACE)
  target_link_libraries(prefixgate_zmq INTERFACE PkgConfig::ZMQ)
endif()
add_library(prefixgate::zmq ALIAS prefixgate_zmq)
if(PREFIXGATE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(PREFIXGATE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# Logging: the shared libspdlog by default. Debian ships spdlog and fmt as .so only, so the static
# build compiles both header-only; spdlog's own header-only target still links the shared fmt,
# hence the headers and defines by hand.
add_library(prefixgate_spdlog INTERFACE)
add_library(prefixgate::spdlog ALIAS prefixgate_spdlog)
if(PREFIXGATE_STATIC)
  target_link_libraries(prefixgate_spdlog INTERFACE fmt::fmt-header-only Threads::Threads)
  target_compile_definitions(prefixgate_spdlog INTERFACE SPDLOG_FMT_EXTERNAL)
  target_include_directories(prefixgate_spdlog SYSTEM INTERFACE
    $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>)
else()
  target_link_libraries(prefixgate_spdlog INTERFACE spdlog::spdlog)
endif()
