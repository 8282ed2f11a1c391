#include "tokenizer_pre_tokenizer.h"

#include "char_class.h"
#include "prefixgate/base/check.h"
#include "tokenizer_json.h"
#include "utf8_decode.h"

namespace prefixgate::canon::internal {
namespace {

using Marked = std::pair<PieceRange, bool>;

// Hugging Face's NormalizedString::split: what becomes of a cover of the text by
// (range, is_match) under each behavior. Appends the surviving non-empty pieces to `out`.
void apply_behavior(const std::vector<Marked>& marked, SplitBehavior behavior,
                    std::vector<PieceRange>& out) {
  auto emit = [&](PieceRange r) {
    if (r.end > r.begin) out.push_back(r);
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Marked& m : marked) emit(m.first);
      return;
    case SplitBehavior::kRemoved:
      for (const Marked& m : marked) {
        if (!m.second) emit(m.first);
      }
      return;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      // Contiguous: runs of the same kind join. MergedWithPrevious: a match joins the piece
      // before it, unless that piece is itself a match.
      std::optional<PieceRange> acc;
      bool previous_match = false;
      for (const Marked& m : marked) {
        const bool join = behavior == SplitBehavior::kContiguous ? m.second == previous_match
                                                                 : m.second && !previous_match;
        if (join && acc) {
          acc->end = m.first.end;
        } else {
          if (acc) emit(*acc);
          acc = m.first;
        }
        previous_match = m.second;
      }
      if (acc) emit(*acc);
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      // A match joins the piece after it, unless that piece is itself a match; built back to
      // front as Hugging Face does.
      std::vector<PieceRange> reversed;
      bool previous_match = false;
      for (auto it = marked.rbegin(); it != marked.rend(); ++it) {
        if (it->second && !previous_match && !reversed.empty()) {
          reversed.back().begin = it->first.begin;
        } else {
          reversed.push_back(it->first);
        }
        previous_match = it->second;
      }
      for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) emit(*it);
      return;
    }
  }
}

// Marks each code point of text[begin, end) for which `is_match` holds as its own match, the
// stretches between them as non-matches (Hugging Face's Pattern for Fn(char) -> bool).
template <class Pred>
void mark_code_points(std::string_view text, std::uint32_t begin, std::uint32_t end, Pred is_match,
                      std::vector<Marked>& marked) {
  std::uint32_t gap = begin;
  for (std::uint32_t pos = begin; pos < end;) {
    const DecodedCodePoint d = decode_utf8(text.substr(0, end), pos);
    if (is_match(d.cp)) {
      if (gap < pos) marked.push_back({{gap, pos}, false});
      marked.push_back({{pos, pos + d.bytes}, true});
      gap = pos + d.bytes;
    }
    pos += d.bytes;
  }
  if (gap < end) marked.push_back({{gap, end}, false});
}

bool is_numeric(char32_t cp) {
  const std::uint8_t cat = general_category(cp);
  return cat == 9 || cat == 10 || cat == 11;  // Nd, Nl, No: Rust's char::is_numeric
}

const char* behavior_name(SplitBehavior b) {
  switch (b) {
    case SplitBehavior::kRemoved: return "Removed";
    case SplitBehavior::kIsolated: return "Isolated";
    case SplitBehavior::kMergedWithPrevious: return "MergedWithPrevious";
    case SplitBehavior::kMergedWithNext: return "MergedWithNext";
    case SplitBehavior::kContiguous: return "Contiguous";
  }
  return "?";
}

}  // namespace

const PatternScanner& gpt2_scanner() {
  static const PatternScanner scanner(SplitPattern::kGpt2);
  return scanner;
}

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {
  // [Split(known regex, Isolated)], optionally followed by a ByteLevel that neither prepends
  // nor splits; or a lone ByteLevel splitting with GPT-2's pattern.
  const std::size_t n = steps_.size();
  const PreTokenizerStep* last = n > 0 ? &steps_[n - 1] : nullptr;
  const bool plain_byte_level = last && last->kind == PreTokenizerStep::Kind::kByteLevel &&
                                !last->add_prefix_space && !last->use_regex;
  const std::size_t splits = plain_byte_level ? n - 1 : n;
  if (splits == 1 && steps_[0].kind == PreTokenizerStep::Kind::kSplit && steps_[0].scanner &&
      steps_[0].behavior == SplitBehavior::kIsolated && !steps_[0].invert) {
    single_scanner_ = &*steps_[0].scanner;
  } else if (n == 1 && last->kind == PreTokenizerStep::Kind::kByteLevel &&
             !last->add_prefix_space && last->use_regex) {
    single_scanner_ = &gpt2_scanner();
  }
  for (const PreTokenizerStep& s : steps_) {
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) byte_level_ = true;
    if (s.kind == PreTokenizerStep::Kind::kMetaspace && s.prepend_scheme == PrependScheme::kFirst) {
      needs_origin_ = true;
    }
    if (s.kind == PreTokenizerStep::Kind::kMetaspace ||
        (s.kind == PreTokenizerStep::Kind::kByteLevel && s.add_prefix_space)) {
      rewrites_ = true;
    }
  }
}

std::string PreTokenizer::describe() const {
  std::string out;
  for (const PreTokenizerStep& s : steps_) {
    if (!out.empty()) out += "+";
    switch (s.kind) {
      case PreTokenizerStep::Kind::kSplit:
        out += "Split(";
        if (s.scanner) {
          switch (s.scanner->pattern()) {
            case SplitPattern::kLlama3: out += "llama3"; break;
            case SplitPattern::kQwen2: out += "qwen2"; break;
            case SplitPattern::kGpt2: out += "gpt2"; break;
          }
        } else {
          out += "regex";
        }
        out += std::string(",") + behavior_name(s.behavior) + (s.invert ? ",invert" : "") + ")";
        break;
      case PreTokenizerStep::Kind::kDigits: out += "Digits"; break;
      case PreTokenizerStep::Kind::kByteLevel: out += "ByteLevel"; break;
      case PreTokenizerStep::Kind::kMetaspace: out += "Metaspace"; break;
    }
  }
  return out.empty() ? "none" : out;
}

void PreTokenizer::run(std::string_view text, const std::uint32_t* origin,
                       PreTokenizerScratch& s) const {
  PG_DCHECK(!needs_origin_ || origin != nullptr);
  s.text = text;
  s.origin = origin;
  s.pieces.clear();
  if (text.empty()) return;
  s.pieces.push_back({0, static_cast<std::uint32_t>(text.size())});
  for (const PreTokenizerStep& step : steps_) {
    switch (step.kind) {
      case PreTokenizerStep::Kind::kSplit:
      case PreTokenizerStep::Kind::kDigits: split_step(step, s); break;
      case PreTokenizerStep::Kind::kByteLevel:
        if (step.add_prefix_space) rewrite_step(step, s);
        if (step.use_regex) split_step(step, s);
        break;
      case PreTokenizerStep::Kind::kMetaspace:
        rewrite_step(step, s);
        if (step.split) split_step(step, s);
        break;
    }
  }
}

void PreTokenizer::split_step(const PreTokenizerStep& step, PreTokenizerScratch& s) const {
  const PatternScanner& gpt2 = gpt2_scanner();
  s.next_pieces.clear();
  const std::string_view text = s.text;
  for (const PieceRange piece : s.pieces) {
    const std::string_view sub = text.substr(0, piece.end);
    const PatternScanner* scanner = nullptr;
    SplitBehavior behavior = step.behavior;
    bool invert = step.invert;
    if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
      scanner = &gpt2;
      behavior = SplitBehavior::kIsolated;
      invert = false;
    } else if (step.scanner) {
      scanner = &*step.scanner;
    }
    // The fast path: a scanned pattern, whose matches cover the text, split in isolation.
    if (scanner && behavior == SplitBehavior::kIsolated) {
      for (std::uint32_t p = piece.begin; p < piece.end;) {
        const auto e = static_cast<std::uint32_t>(scanner->match_end(sub, p));
        s.next_pieces.push_back({p, e});
        p = e;
      }
      continue;
    }
    s.marked.clear();
    if (scanner) {
      for (std::uint32_t p = piece.begin; p < piece.end;) {
        const auto e = static_cast<std::uint32_t>(scanner->match_end(sub, p));
        s.marked.push_back({{p, e}, true});
        p = e;
      }
    } else if (step.kind == PreTokenizerStep::Kind::kDigits) {
      mark_code_points(text, piece.begin, piece.end, is_numeric, s.marked);
      behavior = step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
    } else if (step.kind == PreTokenizerStep::Kind::kMetaspace) {
      const char32_t replacement = decode_utf8(step.replacement, 0).cp;
      mark_code_points(
          text, piece.begin, piece.end, [&](char32_t cp) { return cp == replacement; }, s.marked);
      behavior = SplitBehavior::kMergedWithNext;
    } else {
      // The regex sees only this piece, as in Hugging Face (a lookahead stops at its end).
      const std::string_view piece_text = text.substr(piece.begin, piece.end - piece.begin);
      s.matches.clear();
      step.regex->find_all(piece_text, s.matches);
      std::uint32_t gap = piece.begin;
      for (const RegexMatch& m : s.matches) {
        const auto b = static_cast<std::uint32_t>(piece.begin + m.begin);
        const auto e = static_cast<std::uint32_t>(piece.begin + m.end);
        if (gap < b) s.marked.push_back({{gap, b}, false});
        s.marked.push_back({{b, e}, true});
        gap = e;
      }
      if (gap < piece.end) s.marked.push_back({{gap, piece.end}, false});
    }
    if (invert) {
      for (Marked& m : s.marked) m.second = !m.second;
    }
    apply_behavior(s.marked, behavior, s.next_pieces);
  }
  s.pieces.swap(s.next_pieces);
}

void PreTokenizer::rewrite_step(const PreTokenizerStep& step, PreTokenizerScratch& s) const {
  // Write into whichever buffer s.text does not live in.
  const int target = s.text.data() == s.buffers[0].data() ? 1 : 0;
  std::string& out = s.buffers[target];
  std::vector<std::uint32_t>& out_origin = s.origins[target];
  out.clear();
  out_origin.clear();
  const bool tracked = s.origin != nullptr;
  const std::string_view text = s.text;
  auto copy = [&](std::uint32_t from, std::uint32_t to) {
    out.append(text.substr(from, to - from));
    if (tracked) {
      out_origin.insert(out_origin.end(), s.origin + from, s.origin + to);
    }
  };
  auto insert = [&](std::string_view what, std::uint32_t at) {
    out.append(what);
    if (tracked) out_origin.insert(out_origin.end(), what.size(), s.origin[at]);
  };
  s.next_pieces.clear();
  for (const PieceRange piece : s.pieces) {
    const auto begin = static_cast<std::uint32_t>(out.size());
    if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
      if (text[piece.begin] != ' ') insert(" ", piece.begin);
      copy(piece.begin, piece.end);
    } else {
      // Metaspace: every ' ' becomes the replacement; then, by the scheme, the replacement is
      // prepended to a piece that does not start with it ("first": only to a piece that starts
      // at the very beginning of the input).
      const std::string_view rep = step.replacement;
      const bool starts_with = text[piece.begin] == ' ' ||
                               text.substr(piece.begin, piece.end - piece.begin).starts_with(rep);
      const bool prepend =
          !starts_with &&
          (step.prepend_scheme == PrependScheme::kAlways ||
           (step.prepend_scheme == PrependScheme::kFirst && s.origin[piece.begin] == 0));
      if (prepend) insert(rep, piece.begin);
      std::uint32_t copied = piece.begin;
      for (std::uint32_t p = piece.begin; p < piece.end; ++p) {
        if (text[p] != ' ') continue;
        copy(copied, p);
        insert(rep, p);
        copied = p + 1;
      }
      copy(copied, piece.end);
    }
    s.next_pieces.push_back({begin, static_cast<std::uint32_t>(out.size())});
  }
  if (tracked) out_origin.push_back(s.origin[text.size()]);
  s.pieces.swap(s.next_pieces);
  s.text = out;
  s.origin = tracked ? out_origin.data() : nullptr;
}

namespace {

Result<SplitBehavior> read_behavior(const Field& f) {
  auto b = required_string(f, "behavior");
  if (!b) return b.error();
  const std::string_view v = *b;
  // Older files spell them in snake case.
  if (v == "Removed" || v == "removed") return SplitBehavior::kRemoved;
  if (v == "Isolated" || v == "isolated") return SplitBehavior::kIsolated;
  if (v == "MergedWithPrevious" || v == "merged_with_previous") {
    return SplitBehavior::kMergedWithPrevious;
  }
  if (v == "MergedWithNext" || v == "merged_with_next") return SplitBehavior::kMergedWithNext;
  if (v == "Contiguous" || v == "contiguous") return SplitBehavior::kContiguous;
  return unsupported(f.child_path("behavior"),
                     "Split behavior \"" + std::string(v) + "\" is not supported");
}

Status read_step(const Field& f, std::vector<PreTokenizerStep>& steps) {
  auto type = component_type(f);
  if (!type) return type.error();
  const std::string type_path = f.child_path("type");
  if (!steps.empty() && steps.back().kind == PreTokenizerStep::Kind::kByteLevel) {
    // Hugging Face rewrites the text into its byte alphabet in ByteLevel; what follows would
    // see that alphabet, which our byte-level path never materializes.
    return unsupported(type_path, "a pre-tokenizer after ByteLevel is not supported");
  }
  if (*type == "Sequence") {
    if (Status s = check_known_keys(f, *type, {"pretokenizers"}); !s) return s;
    auto list = required_member(f, "pretokenizers");
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
  PreTokenizerStep step;
  if (*type == "Split") {
    if (Status s = check_known_keys(f, *type, {"pattern", "behavior", "invert"}); !s) return s;
    auto pattern = read_pattern(f);
    if (!pattern) return pattern.error();
    auto behavior = read_behavior(f);
    if (!behavior) return behavior.error();
    auto invert = optional_bool(f, "invert", false);
    if (!invert) return invert.error();
    step.kind = PreTokenizerStep::Kind::kSplit;
    step.behavior = *behavior;
    step.invert = *invert;
    if (pattern->is_regex) {
      if (const auto known = split_pattern_from_regex(pattern->text)) step.scanner.emplace(*known);
      auto re = Regex::compile(pattern->text);
      if (!re) {
        return make_error(re.error().code, pattern->path + ": " + re.error().message,
                          pattern->path);
      }
      step.regex = std::make_shared<const Regex>(std::move(*re));
    } else {
      step.regex = std::make_shared<const Regex>(Regex::literal(pattern->text));
    }
  } else if (*type == "ByteLevel") {
    if (Status s = check_known_keys(f, *type, {"add_prefix_space", "trim_offsets", "use_regex"});
        !s) {
      return s;
    }
    auto add_prefix_space = optional_bool(f, "add_prefix_space", true);  // HF's defaults
    auto use_regex = optional_bool(f, "use_regex", true);
    auto trim_offsets = optional_bool(f, "trim_offsets", true);  // offsets only: not used
    if (!add_prefix_space) return add_prefix_space.error();
    if (!use_regex) return use_regex.error();
    if (!trim_offsets) return trim_offsets.error();
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = *add_prefix_space;
    step.use_regex = *use_regex;
  } else if (*type == "Digits") {
    if (Status s = check_known_keys(f, *type, {"individual_digits"}); !s) return s;
    auto individual = optional_bool(f, "individual_digits", false);
    if (!individual) return individual.error();
    step.kind = PreTokenizerStep::Kind::kDigits;
    step.individual_digits = *individual;
  } else if (*type == "Metaspace") {
    if (Status s = check_known_keys(
            f, *type, {"replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
        !s) {
      return s;
    }
    auto replacement = required_string(f, "replacement");
    if (!replacement) return replacement.error();
    if (replacement->empty() || decode_utf8(*replacement, 0).bytes != replacement->size() ||
        decode_utf8(*replacement, 0).cp == kInvalidCodePoint) {
      return invalid(f.child_path("replacement"), "must be a single character");
    }
    auto scheme = optional_string(f, "prepend_scheme");
    auto add_prefix_space = member(f, "add_prefix_space");
    auto split = optional_bool(f, "split", true);
    if (!scheme) return scheme.error();
    if (!split) return split.error();
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    step.replacement = std::string(*replacement);
    step.split = *split;
    step.prepend_scheme = PrependScheme::kAlways;
    if (*scheme) {
      if (**scheme == "first") {
        step.prepend_scheme = PrependScheme::kFirst;
      } else if (**scheme == "always") {
        step.prepend_scheme = PrependScheme::kAlways;
      } else if (**scheme == "never") {
        step.prepend_scheme = PrependScheme::kNever;
      } else {
        return unsupported(f.child_path("prepend_scheme"),
                           "prepend_scheme \"" + std::string(**scheme) + "\" is not supported");
      }
    }
    // Files older than prepend_scheme say add_prefix_space; false means "never", and Hugging
    // Face refuses a file where the two disagree.
    auto aps = optional_bool(f, "add_prefix_space", true);
    if (!aps) return aps.error();
    if (add_prefix_space && !add_prefix_space->value.is_null() && !*aps) {
      if (*scheme && step.prepend_scheme != PrependScheme::kNever) {
        return invalid(f.child_path("add_prefix_space"),
                       "add_prefix_space=false contradicts prepend_scheme");
      }
      step.prepend_scheme = PrependScheme::kNever;
    }
  } else {
    return unsupported(type_path, "pre_tokenizer type \"" + std::string(*type) +
                                      "\" is not supported (Split, ByteLevel, Digits, Metaspace "
                                      "and Sequence are)");
  }
  steps.push_back(std::move(step));
  return {};
}

}  // namespace

Result<PreTokenizer> read_pre_tokenizer(const Field& root) {
  auto f = member(root, "pre_tokenizer");
  if (!f || f->value.is_null()) return PreTokenizer{};
  std::vector<PreTokenizerStep> steps;
  if (Status s = read_step(*f, steps); !s) return s.error();
  return PreTokenizer(std::move(steps));
}

Result<PreTokenizer> pre_tokenizer_from_json(std::string_view json) {
  return read_component("pre_tokenizer", json, read_pre_tokenizer);
}

}  // namespace prefixgate::canon::internal
