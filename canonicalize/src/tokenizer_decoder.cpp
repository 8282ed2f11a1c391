#include "tokenizer_decoder.h"

#include "byte_level.h"
#include "tokenizer_json.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

using Step = Decoder::Step;

// "<0xNN>" -> the byte, as ByteFallback reads it.
std::optional<unsigned char> byte_token(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return std::nullopt;
  unsigned v = 0;
  for (std::size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    v *= 16;
    if (c >= '0' && c <= '9') {
      v += static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      v += static_cast<unsigned>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      v += static_cast<unsigned>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
  }
  return static_cast<unsigned char>(v);
}

void replace_all(const Regex& pattern, std::string_view content, std::string& token,
                 std::vector<RegexMatch>& matches) {
  matches.clear();
  pattern.find_all(token, matches);
  if (matches.empty()) return;
  std::string out;
  std::size_t copied = 0;
  for (const RegexMatch& m : matches) {
    out.append(token, copied, m.begin - copied);
    out.append(content);
    copied = m.end;
  }
  out.append(token, copied);
  token = std::move(out);
}

// Strip: up to `start` leading and `stop` trailing copies of `c`, per token.
void strip(std::string& token, char32_t c, std::size_t start, std::size_t stop) {
  std::string encoded;
  append_utf8(c, encoded);
  std::size_t begin = 0, end = token.size();
  for (std::size_t i = 0; i < start && std::string_view(token).substr(begin).starts_with(encoded);
       ++i) {
    begin += encoded.size();
  }
  for (std::size_t i = 0; i < stop && end >= begin + encoded.size() &&
                          std::string_view(token).substr(0, end).ends_with(encoded);
       ++i) {
    end -= encoded.size();
  }
  token = token.substr(begin, end - begin);
}

}  // namespace

std::string byte_level_decode(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t pos = 0; pos < token.size();) {
    const DecodedCodePoint d = decode_utf8(token, pos);
    const int b = unicode_to_byte(d.cp);
    if (b < 0) return std::string(token);
    bytes += static_cast<char>(b);
    pos += d.bytes;
  }
  return bytes;
}

std::string Decoder::describe() const {
  if (null_) return "none";
  std::string out;
  for (const Step& s : steps_) {
    if (!out.empty()) out += "+";
    switch (s.kind) {
      case Step::Kind::kByteLevel: out += "ByteLevel"; break;
      case Step::Kind::kMetaspace: out += "Metaspace"; break;
      case Step::Kind::kReplace: out += "Replace"; break;
      case Step::Kind::kByteFallback: out += "ByteFallback"; break;
      case Step::Kind::kFuse: out += "Fuse"; break;
      case Step::Kind::kStrip: out += "Strip"; break;
    }
  }
  return out;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  std::string text;
  if (null_) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text += ' ';
      text += tokens[i];
    }
    return text;
  }
  std::vector<RegexMatch> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kByteLevel: {
        std::string all;
        for (const std::string& t : tokens) all += byte_level_decode(t);
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::Kind::kMetaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          std::string out;
          const std::string_view t = tokens[i];
          for (std::size_t pos = 0; pos < t.size();) {
            if (t.substr(pos).starts_with(step.replacement)) {
              // Hugging Face drops every replacement character of the first token (not only a
              // leading one) unless prepend_scheme is "never".
              if (!(i == 0 && step.drop_first_replacement)) out += ' ';
              pos += step.replacement.size();
            } else {
              out += t[pos++];
            }
          }
          tokens[i] = std::move(out);
        }
        break;
      case Step::Kind::kReplace:
        for (std::string& t : tokens) replace_all(*step.pattern, step.replacement, t, matches);
        break;
      case Step::Kind::kByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        bool in_bytes = false;
        for (std::string& t : tokens) {
          if (const auto b = byte_token(t)) {
            bytes += static_cast<char>(*b);
            in_bytes = true;
            continue;
          }
          if (in_bytes) out.push_back(std::move(bytes));
          bytes.clear();
          in_bytes = false;
          out.push_back(std::move(t));
        }
        if (in_bytes) out.push_back(std::move(bytes));
        tokens = std::move(out);
        break;
      }
      case Step::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Step::Kind::kStrip:
        for (std::string& t : tokens) strip(t, step.strip_char, step.strip_start, step.strip_stop);
        break;
    }
  }
  for (const std::string& t : tokens) text += t;
  return text;
}

namespace {

Status read_step(const Field& f, std::vector<Step>& steps) {
  auto type = component_type(f);
  if (!type) return type.error();
  const std::string type_path = f.child_path("type");
  if (*type == "Sequence") {
    if (Status s = check_known_keys(f, *type, {"decoders"}); !s) return s;
    auto list = required_member(f, "decoders");
    if (!list) return list.error();
    simdjson::dom::array items;
    if (list->value.get_array().get(items) != simdjson::SUCCESS) {
      return wrong_type(*list, "an array");
    }
    std::size_t i = 0;
    for (const simdjson::dom::element item : items) {
      if (Status s = read_step(Field{item, list->index_path(i++)}, steps); !s) return s;
    }
    return {};
  }
  Step step;
  if (*type == "ByteLevel") {
    // Its options concern encoding; decoding ignores them.
    if (Status s = check_known_keys(f, *type, {"add_prefix_space", "trim_offsets", "use_regex"});
        !s) {
      return s;
    }
    step.kind = Step::Kind::kByteLevel;
  } else if (*type == "Metaspace") {
    if (Status s = check_known_keys(
            f, *type, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
        !s) {
      return s;
    }
    auto replacement = required_string(f, "replacement");
    if (!replacement) return replacement.error();
    if (replacement->empty()) return invalid(f.child_path("replacement"), "must not be empty");
    auto scheme = optional_string(f, "prepend_scheme");
    auto aps = optional_bool(f, "add_prefix_space", true);
    if (!scheme) return scheme.error();
    if (!aps) return aps.error();
    step.kind = Step::Kind::kMetaspace;
    step.replacement = std::string(*replacement);
    step.drop_first_replacement = *scheme ? **scheme != "never" : *aps;
  } else if (*type == "Replace") {
    if (Status s = check_known_keys(f, *type, {"pattern", "content"}); !s) return s;
    auto pattern = read_pattern(f);
    if (!pattern) return pattern.error();
    auto content = required_string(f, "content");
    if (!content) return content.error();
    step.kind = Step::Kind::kReplace;
    step.replacement = std::string(*content);
    if (pattern->is_regex) {
      auto re = Regex::compile(pattern->text);
      if (!re) {
        return make_error(re.error().code, pattern->path + ": " + re.error().message,
                          pattern->path);
      }
      step.pattern = std::make_shared<const Regex>(std::move(*re));
    } else {
      step.pattern = std::make_shared<const Regex>(Regex::literal(pattern->text));
    }
  } else if (*type == "ByteFallback") {
    if (Status s = check_known_keys(f, *type, {}); !s) return s;
    step.kind = Step::Kind::kByteFallback;
  } else if (*type == "Fuse") {
    if (Status s = check_known_keys(f, *type, {}); !s) return s;
    step.kind = Step::Kind::kFuse;
  } else if (*type == "Strip") {
    if (Status s = check_known_keys(f, *type, {"content", "start", "stop"}); !s) return s;
    auto content = required_string(f, "content");
    if (!content) return content.error();
    if (content->empty() || decode_utf8(*content, 0).bytes != content->size()) {
      return invalid(f.child_path("content"), "must be a single character");
    }
    auto start = optional_uint(f, "start", 0);
    auto stop = optional_uint(f, "stop", 0);
    if (!start) return start.error();
    if (!stop) return stop.error();
    step.kind = Step::Kind::kStrip;
    step.strip_char = decode_utf8(*content, 0).cp;
    step.strip_start = *start;
    step.strip_stop = *stop;
  } else {
    return unsupported(type_path, "decoder type \"" + std::string(*type) +
                                      "\" is not supported (ByteLevel, Metaspace, Replace, "
                                      "ByteFallback, Fuse, Strip and Sequence are)");
  }
  steps.push_back(std::move(step));
  return {};
}

}  // namespace

Result<Decoder> read_decoder(const Field& root) {
  auto f = member(root, "decoder");
  if (!f || f->value.is_null()) return Decoder{};
  std::vector<Step> steps;
  if (Status s = read_step(*f, steps); !s) return s.error();
  return Decoder(std::move(steps), /*null_decoder=*/false);
}

Result<Decoder> decoder_from_json(std::string_view json) {
  return read_component("decoder", json, read_decoder);
}

}  // namespace prefixgate::canon::internal
