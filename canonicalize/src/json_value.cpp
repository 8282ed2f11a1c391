// json::Value's object helpers. Parsing lives in json_parse.cpp, writing in json_write.cpp.
#include <algorithm>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& m : as_object()) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

Value* Value::find(std::string_view key) {
  return const_cast<Value*>(std::as_const(*this).find(key));  // NOLINT: same object
}

void Value::set(std::string_view key, Value value) {
  if (Value* existing = find(key)) {
    *existing = std::move(value);
    return;
  }
  as_object().push_back(Member{std::string(key), std::move(value)});
}

bool Value::erase(std::string_view key) {
  if (!is_object()) return false;
  Object& members = as_object();
  auto it =
      std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.key == key; });
  if (it == members.end()) return false;
  members.erase(it);
  return true;
}

const char* type_name(Type type) {
  switch (type) {
    case Type::kNull: return "null";
    case Type::kBool: return "boolean";
    case Type::kNumber: return "number";
    case Type::kString: return "string";
    case Type::kArray: return "array";
    case Type::kObject: return "object";
  }
  return "value";
}

}  // namespace prefixgate::json
