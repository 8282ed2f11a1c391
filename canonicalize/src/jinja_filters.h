// The filter implementations, split by theme across jinja_filters*.cpp, and the helpers they
// share. Each takes the piped value and the call's arguments, and reports errors through `in`.
#pragma once

#include <string_view>

#include "jinja_interp.h"

namespace prefixgate::canon::jinja {

using FilterFn = Value (*)(Interpreter& in, const Value& input, CallArgs& args);

// Argument `index` or named `name`, or `fallback` when absent.
Value arg(const CallArgs& args, std::size_t index, std::string_view name, Value fallback = Value());

// Jinja2's make_attrgetter: "a.b.0" looked up part by part with getitem semantics.
Value lookup_attribute(Interpreter& in, const Value& item, std::string_view attribute);

// Sequence filters (jinja_filters_seq.cpp).
Value filter_join(Interpreter& in, const Value& input, CallArgs& args);
Value filter_map(Interpreter& in, const Value& input, CallArgs& args);
Value filter_select(Interpreter& in, const Value& input, CallArgs& args);
Value filter_reject(Interpreter& in, const Value& input, CallArgs& args);
Value filter_selectattr(Interpreter& in, const Value& input, CallArgs& args);
Value filter_rejectattr(Interpreter& in, const Value& input, CallArgs& args);
Value filter_unique(Interpreter& in, const Value& input, CallArgs& args);
Value filter_sort(Interpreter& in, const Value& input, CallArgs& args);
Value filter_dictsort(Interpreter& in, const Value& input, CallArgs& args);
Value filter_batch(Interpreter& in, const Value& input, CallArgs& args);
Value filter_max(Interpreter& in, const Value& input, CallArgs& args);
Value filter_min(Interpreter& in, const Value& input, CallArgs& args);
Value filter_sum(Interpreter& in, const Value& input, CallArgs& args);

}  // namespace prefixgate::canon::jinja
