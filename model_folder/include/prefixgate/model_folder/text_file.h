// Reading a whole file as text, with errors that name it.
#pragma once

#include <string>

#include "prefixgate/base/status.h"

namespace prefixgate {

// kNotFound when `path` is not a regular file; kInternal when it cannot be read.
Result<std::string> read_text_file(const std::string& path);

}  // namespace prefixgate
