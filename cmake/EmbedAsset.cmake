# Turns a file into a C++ source that returns its bytes, so a web asset ships inside the binary.
# Run as a build step (cmake -P), so editing the asset rebuilds the source:
#
#   cmake -DINPUT=page.html -DOUTPUT=page_asset.cpp -DNAMESPACE=ns -DFUNCTION=page_html
#         -P cmake/EmbedAsset.cmake
#
# defines `std::string_view ns::page_html()`. A byte array rather than a string literal: no
# delimiter to escape, and no 64 KiB limit on literals (-Woverlength-strings under -Wpedantic).
foreach(var INPUT OUTPUT NAMESPACE FUNCTION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "EmbedAsset.cmake: ${var} is not set")
  endif()
endforeach()
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
if(hex_length EQUAL 0)
  message(FATAL_ERROR "EmbedAsset.cmake: ${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${input_name} by cmake/EmbedAsset.cmake. Do not edit: edit ${input_name}.
#include <string_view>

namespace ${NAMESPACE} {
namespace {
constexpr unsigned char kBytes[] = {${bytes}};
}  // namespace

std::string_view ${FUNCTION}() {
  return {reinterpret_cast<const char*>(kBytes), sizeof kBytes};
}

}  // namespace ${NAMESPACE}
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
