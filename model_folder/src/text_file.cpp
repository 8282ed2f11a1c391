#include "prefixgate/model_folder/text_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace prefixgate {

Result<std::string> read_text_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return make_error(ErrorCode::kNotFound, path + ": not found");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return make_error(ErrorCode::kInternal, path + ": cannot be read");
  return std::move(text).str();
}

}  // namespace prefixgate
