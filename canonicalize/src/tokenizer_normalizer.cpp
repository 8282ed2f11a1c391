#include "tokenizer_normalizer.h"

#include "char_class.h"
#include "tokenizer_json.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

using Step = Normalizer::Step;

// One step from `in` (with `in_origin`, empty when not tracked) into `out`; false when the step
// changes nothing (then `out` is untouched).
class StepRunner {
 public:
  StepRunner(std::string_view in, const std::vector<std::uint32_t>& in_origin, AlignedText& out)
      : in_(in), in_origin_(in_origin), out_(out) {}

  bool tracked() const { return !in_origin_.empty(); }

  void begin() {
    out_.text.clear();
    out_.origin.clear();
  }
  // Copies in_[from, to) with its origin.
  void copy(std::size_t from, std::size_t to) {
    out_.text.append(in_.substr(from, to - from));
    if (tracked()) {
      out_.origin.insert(out_.origin.end(), in_origin_.begin() + static_cast<std::ptrdiff_t>(from),
                         in_origin_.begin() + static_cast<std::ptrdiff_t>(to));
    }
  }
  // Writes `text`, every byte of which comes from where in_[at] came from.
  void insert(std::string_view text, std::size_t at) {
    out_.text.append(text);
    if (tracked()) out_.origin.insert(out_.origin.end(), text.size(), in_origin_[at]);
  }
  void end(std::size_t at) {
    if (tracked()) out_.origin.push_back(in_origin_[at]);
  }

 private:
  std::string_view in_;
  const std::vector<std::uint32_t>& in_origin_;
  AlignedText& out_;
};

bool is_white_space_at(std::string_view text, std::size_t pos, std::size_t& bytes) {
  const DecodedCodePoint d = decode_utf8(text, pos);
  bytes = d.bytes;
  return is_white_space_code_point(d.cp);
}

}  // namespace

Normalizer::Normalizer(std::vector<Step> steps) : steps_(std::move(steps)) {
  for (const Step& s : steps_) {
    if (s.kind == Step::Kind::kNfc && !nfc_) nfc_.emplace();
  }
}

std::string Normalizer::describe() const {
  std::string out;
  for (const Step& s : steps_) {
    if (!out.empty()) out += "+";
    switch (s.kind) {
      case Step::Kind::kNfc: out += "NFC"; break;
      case Step::Kind::kPrepend: out += "Prepend"; break;
      case Step::Kind::kReplace: out += "Replace"; break;
      case Step::Kind::kStrip: out += "Strip"; break;
    }
  }
  return out;
}

bool Normalizer::normalize(std::string_view input, std::size_t input_offset, bool track,
                           AlignedText& out) const {
  AlignedText buffers[2];
  std::string_view cur = input;
  std::vector<std::uint32_t> identity;
  const std::vector<std::uint32_t>* cur_origin = &identity;
  if (track) {
    identity.resize(input.size() + 1);
    for (std::size_t i = 0; i <= input.size(); ++i) {
      identity[i] = static_cast<std::uint32_t>(input_offset + i);
    }
  }
  int next_buffer = 0;
  bool changed = false;
  std::vector<RegexMatch> matches;
  NfcResult nfc;
  for (const Step& step : steps_) {
    AlignedText& dst = buffers[next_buffer];
    StepRunner run(cur, *cur_origin, dst);
    bool step_changed = false;
    switch (step.kind) {
      case Step::Kind::kNfc: {
        if (!nfc_->normalize(cur, nfc)) break;
        step_changed = true;
        run.begin();
        std::size_t copied = 0;
        for (const NfcChange& c : nfc.changes) {
          run.copy(copied, c.input_begin);
          run.insert(std::string_view(nfc.text).substr(c.normalized_begin,
                                                       c.normalized_end - c.normalized_begin),
                     c.input_begin);
          copied = c.input_end;
        }
        run.copy(copied, cur.size());
        run.end(cur.size());
        break;
      }
      case Step::Kind::kPrepend:
        // Hugging Face prepends nothing to an empty string.
        if (cur.empty()) break;
        step_changed = true;
        run.begin();
        run.insert(step.text, 0);
        run.copy(0, cur.size());
        run.end(cur.size());
        break;
      case Step::Kind::kReplace: {
        matches.clear();
        step.pattern->find_all(cur, matches);
        if (matches.empty()) break;
        step_changed = true;
        run.begin();
        std::size_t copied = 0;
        for (const RegexMatch& m : matches) {
          run.copy(copied, m.begin);
          run.insert(step.text, m.begin < cur.size() ? m.begin : cur.size());
          copied = m.end;
        }
        run.copy(copied, cur.size());
        run.end(cur.size());
        break;
      }
      case Step::Kind::kStrip: {
        std::size_t begin = 0, end = cur.size(), bytes = 0;
        if (step.left) {
          while (begin < end && is_white_space_at(cur, begin, bytes)) begin += bytes;
        }
        if (step.right) {
          while (end > begin) {
            std::size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(cur[start]) & 0xC0) == 0x80) {
              --start;
            }
            if (!is_white_space_at(cur, start, bytes) || start + bytes != end) break;
            end = start;
          }
        }
        if (begin == 0 && end == cur.size()) break;
        step_changed = true;
        run.begin();
        run.copy(begin, end);
        run.end(end);
        break;
      }
    }
    if (!step_changed) continue;
    changed = true;
    cur = dst.text;
    cur_origin = &dst.origin;
    next_buffer ^= 1;
  }
  if (!changed) return false;
  out = std::move(buffers[next_buffer ^ 1]);
  return true;
}

std::string Normalizer::normalize_content(std::string_view content) const {
  AlignedText out;
  if (!normalize(content, 0, false, out)) return std::string(content);
  return out.text;
}

namespace {

Status read_step(const Field& f, std::vector<Step>& steps) {
  auto type = component_type(f);
  if (!type) return type.error();
  const std::string type_path = f.child_path("type");
  if (*type == "Sequence") {
    if (Status s = check_known_keys(f, *type, {"normalizers"}); !s) return s;
    auto list = required_member(f, "normalizers");
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
  if (*type == "NFC") {
    if (Status s = check_known_keys(f, *type, {}); !s) return s;
    step.kind = Step::Kind::kNfc;
  } else if (*type == "Prepend") {
    if (Status s = check_known_keys(f, *type, {"prepend"}); !s) return s;
    auto prepend = required_string(f, "prepend");
    if (!prepend) return prepend.error();
    step.kind = Step::Kind::kPrepend;
    step.text = std::string(*prepend);
  } else if (*type == "Replace") {
    if (Status s = check_known_keys(f, *type, {"pattern", "content"}); !s) return s;
    auto pattern = read_pattern(f);
    if (!pattern) return pattern.error();
    auto content = required_string(f, "content");
    if (!content) return content.error();
    step.kind = Step::Kind::kReplace;
    step.text = std::string(*content);
    if (pattern->is_regex) {
      auto re = Regex::compile(pattern->text);
      if (!re)
        return make_error(re.error().code, pattern->path + ": " + re.error().message,
                          pattern->path);
      step.pattern = std::make_shared<const Regex>(std::move(*re));
    } else {
      step.pattern = std::make_shared<const Regex>(Regex::literal(pattern->text));
    }
  } else if (*type == "Strip") {
    if (Status s = check_known_keys(f, *type, {"strip_left", "strip_right"}); !s) return s;
    auto left = optional_bool(f, "strip_left", true);
    auto right = optional_bool(f, "strip_right", true);
    if (!left) return left.error();
    if (!right) return right.error();
    step.kind = Step::Kind::kStrip;
    step.left = *left;
    step.right = *right;
  } else {
    return unsupported(type_path, "normalizer type \"" + std::string(*type) +
                                      "\" is not supported (NFC, Prepend, Replace, Strip and "
                                      "Sequence are)");
  }
  steps.push_back(std::move(step));
  return {};
}

}  // namespace

Result<Normalizer> read_normalizer(const Field& root) {
  auto f = member(root, "normalizer");
  if (!f || f->value.is_null()) return Normalizer{};
  std::vector<Step> steps;
  if (Status s = read_step(*f, steps); !s) return s.error();
  return Normalizer(std::move(steps));
}

Result<Normalizer> normalizer_from_json(std::string_view json) {
  return read_component("normalizer", json, read_normalizer);
}

}  // namespace prefixgate::canon::internal
