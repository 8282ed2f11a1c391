// json::Value's object helpers. Parsing lives in json_parse.cpp, writing in json_write.cpp.
#include <algorithm>

#include "prefixgate/base/check.h"
#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

// Whether `p` is `tree` or a value inside it: a walk of the whole tree, for a debug check.
[[maybe_unused]] bool holds(const Value& tree, const Value* p) {
  if (&tree == p) return true;
  if (tree.is_array()) {
    return std::any_of(tree.as_array().begin(), tree.as_array().end(),
                       [&](const Value& e) { return holds(e, p); });
  }
  if (tree.is_object()) {
    return std::any_of(tree.as_object().begin(), tree.as_object().end(),
                       [&](const Member& m) { return holds(m.value, p); });
  }
  return false;
}

}  // namespace

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& m : as_object()) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

Value* Value::find(std::string_view key) {
  // The caller may modify what it finds: a shared value gets its own copy first.
  return const_cast<Value*>(std::as_const(write()).find(key));  // NOLINT: same object
}

Value Value::shared(std::shared_ptr<const Value> target) {
  Value out;
  if (target->is_shared()) {
    out.v_ = std::get<kShared>(target->v_);  // refer to the value itself, not to a reference
  } else {
    out.v_ = std::move(target);
  }
  return out;
}

Value Value::share_part(const Value& part) const {
  if (!is_shared() || &part == this) return part;  // a copy, or another reference to the tree
  // The aliasing pointer owns the whole tree: `part` must lie in it to stay alive with it.
  PG_DCHECK(holds(read(), &part), "share_part: the part is not inside this value");
  return shared(std::shared_ptr<const Value>(std::get<kShared>(v_), &part));
}

void Value::unshare() {
  // Copy the alternative out before the reference (perhaps the last) is dropped.
  auto copy = std::get<kShared>(v_)->v_;
  v_ = std::move(copy);
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
