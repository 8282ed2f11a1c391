// json::Value::shared: a value that refers to a tree kept elsewhere reads as that tree, copies
// as a reference, and gets a copy of its own at the first access that may modify it, leaving
// the shared tree as it was.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "prefixgate/canonicalize/json.h"

namespace prefixgate::json {
namespace {

std::shared_ptr<const Value> kept() {
  auto doc = parse(R"({"a":[1,"x",{"b":null}],"s":"text","n":2.50})");
  EXPECT_TRUE(doc.ok());
  return std::make_shared<const Value>(std::move(*doc));
}

TEST(JsonSharedTest, ReadsAsTheTreeItRefersTo) {
  const auto tree = kept();
  const Value v = Value::shared(tree);
  EXPECT_TRUE(v.is_shared());
  EXPECT_TRUE(v.is_object());
  EXPECT_EQ(v.type(), Type::kObject);
  EXPECT_EQ(to_json(v), to_json(*tree));
  EXPECT_EQ(v, *tree);
  EXPECT_EQ(&v.as_object(), &tree->as_object());  // the same members, not a copy
  EXPECT_EQ(v.find("s")->as_string(), "text");
  EXPECT_EQ(v.find("n")->as_number().source, "2.50");
  // Within a tree, and as a scalar.
  Value holder = Object{{"tools", Value::shared(tree)}};
  EXPECT_EQ(to_json(holder), R"({"tools":)" + to_json(*tree) + "}");
  const Value s = Value::shared(std::make_shared<const Value>("x"));
  EXPECT_TRUE(s.is_string());
  EXPECT_EQ(s.as_string(), "x");
  EXPECT_EQ(s, Value("x"));
}

TEST(JsonSharedTest, ACopyRefersToTheSameTree) {
  const auto tree = kept();
  const Value v = Value::shared(tree);
  const Value copy = v;  // NOLINT: the copy is the point
  EXPECT_TRUE(copy.is_shared());
  EXPECT_EQ(&copy.as_object(), &tree->as_object());
  // A reference to a reference refers to the tree itself.
  const Value again = Value::shared(std::make_shared<const Value>(v));
  EXPECT_EQ(&again.as_object(), &tree->as_object());
}

TEST(JsonSharedTest, EachModifyingAccessGetsItsOwnCopyFirst) {
  const auto tree = kept();
  const std::string original = to_json(*tree);
  const auto expect_unshared = [&](Value& v, const char* what) {
    EXPECT_FALSE(v.is_shared()) << what;
    EXPECT_NE(&std::as_const(v).as_object(), &tree->as_object()) << what;
    EXPECT_EQ(to_json(*tree), original) << what;
  };
  {
    Value v = Value::shared(tree);
    v.set("s", "changed");
    EXPECT_EQ(v.find("s")->as_string(), "changed");
    expect_unshared(v, "set");
  }
  {
    Value v = Value::shared(tree);
    EXPECT_TRUE(v.erase("a"));
    EXPECT_EQ(v.find("a"), nullptr);
    expect_unshared(v, "erase");
  }
  {
    Value v = Value::shared(tree);
    Value* a = v.find("a");
    ASSERT_NE(a, nullptr);
    a->as_array().push_back(3);
    EXPECT_EQ(to_json(*v.find("a")), R"([1,"x",{"b":null},3])");
    expect_unshared(v, "find");
  }
  {
    Value v = Value::shared(tree);
    v.as_object().front().key = "z";
    expect_unshared(v, "as_object");
  }
  {
    Value holder = Object{{"tools", Value::shared(tree)}};
    holder.find("tools")->find("s")->as_string() += "!";
    EXPECT_EQ(holder.find("tools")->find("s")->as_string(), "text!");
    EXPECT_EQ(to_json(*tree), original);
  }
}

TEST(JsonSharedTest, OutlivesTheOwnersOtherReferences) {
  auto tree = kept();
  const std::string text = to_json(*tree);
  Value v = Value::shared(tree);
  tree.reset();  // the value's reference keeps the tree
  EXPECT_EQ(to_json(v), text);
  v.set("s", "own");  // its own copy, made from the last reference before it is dropped
  EXPECT_EQ(v.find("a")->as_array().size(), 3u);
  EXPECT_FALSE(v.is_shared());
}

// A part of a shared tree is shared through the tree (which it keeps alive), not copied; a part
// of a value that is not shared is a copy.
TEST(JsonSharedTest, APartOfASharedTreeIsSharedWithIt) {
  auto tree = kept();
  const Value* a = tree->find("a");
  const Value list = Value::shared(tree);
  Value part = list.share_part(*list.find("a"));
  EXPECT_TRUE(part.is_shared());
  EXPECT_EQ(&std::as_const(part).as_array(), &a->as_array());  // the tree's own array
  const Value whole = list.share_part(list);                   // a part that is the tree itself
  EXPECT_EQ(&whole.as_object(), &tree->as_object());
  tree.reset();
  EXPECT_EQ(to_json(part), R"([1,"x",{"b":null}])");  // kept alive by the part alone
  part.as_array().push_back(2);                       // its own copy first
  EXPECT_EQ(to_json(*list.find("a")), R"([1,"x",{"b":null}])");
  EXPECT_EQ(to_json(part), R"([1,"x",{"b":null},2])");

  const Value plain = *kept();
  const Value copied = plain.share_part(*plain.find("a"));
  EXPECT_FALSE(copied.is_shared());
  EXPECT_NE(&copied.as_array(), &plain.find("a")->as_array());
  EXPECT_EQ(copied, *plain.find("a"));
}

}  // namespace
}  // namespace prefixgate::json
