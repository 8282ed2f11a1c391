// The Jinja2 engine against Python's Jinja2: every statement, expression, filter, test and
// method chat templates use, with whitespace control and Undefined semantics. The expected
// outputs in kPythonCases were produced by Jinja2 3.1.6 configured as transformers configures
// it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, transformers'
// tojson, raise_exception, strftime_now at 2024-07-26 12:00:00) over kContext.
#include <gtest/gtest.h>

#include <string>

#include "prefixgate/canonicalize/jinja.h"

namespace prefixgate::canon::jinja {
namespace {

constexpr const char* kContext =
    R"json({"s": "héllo wörld", "l": [3, 1, 2], "d": {"a": 1, "items": 2}, "n": null, "f": 1.5, "msgs": [{"role": "system", "content": "  sys  "}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1, "y": [1, 2]}}}]}]})json";

struct PythonCase {
  const char* name;
  const char* tmpl;
  const char* expected;
};

// clang-format off
constexpr PythonCase kPythonCases[] = {
    {"for_scope_fresh_each_iteration",
     "{% for i in [1,2] %}{% if i == 2 %}{{ x }}{% endif %}{% set x = i %}{% endfor %}",
     ""},
    {"for_set_does_not_leak",
     "{% set x = 1 %}{% for i in [1] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
     "121"},
    {"for_loop_variables",
     "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;"},
    {"for_prev_next",
     "{% for x in 'ab' %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }}|{% endfor %}",
     "-a-b|a-b-|"},
    {"for_cycle",
     "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}",
     "aba"},
    {"for_filter_and_length",
     "{% for x in [1,2,3,4] if x is even %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}none{% endfor %}",
     "1/2:2 2/2:4 "},
    {"for_else",
     "{% for x in [] %}a{% else %}empty{% endfor %}",
     "empty"},
    {"for_items_unpack",
     "{%- for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}",
     "a=1,b=2"},
    {"for_nested_loops",
     "{% for a in [[1,2],[3,4]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }};{% endfor %}",
     "11221;13242;"},
    {"for_dict_iterates_keys",
     "{% for k in d %}{{ k }}{% endfor %}",
     "aitems"},
    {"for_reverse_slice",
     "{% for m in msgs[::-1] %}{{ m.role }},{% endfor %}",
     "assistant,user,system,"},
    {"break_continue",
     "{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "1"},
    {"if_elif_else",
     "{% for x in [1,2,3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}",
     "one two many "},
    {"namespace_assignment",
     "{% set ns = namespace(a=1, found=false) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% set ns.found = true %}{% endfor %}{{ ns.a }}{{ ns.found }}",
     "4True"},
    {"set_tuple",
     "{% set a, b = 1, 2 %}{{ a }}{{ b }}",
     "12"},
    {"set_block",
     "{% set x %}  block {{ 1 }} {% endset %}[{{ x }}]",
     "[  block 1 ]"},
    {"set_block_filter",
     "{% set x | upper %}abc{% endset %}{{ x }}",
     "ABC"},
    {"macro_defaults_varargs_kwargs",
     "{% macro m(a, b='B') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}{{ m(1, 2, 3) }}{{ m(1, c=4) }}",
     "1B(){}12(3,){}1B(){'c': 4}"},
    {"macro_sees_globals_at_call",
     "{% macro m() %}{{ y }}{% endmacro %}{% set y = 1 %}{{ m() }}{% set y = 2 %}{{ m() }}",
     "12"},
    {"macro_recursion",
     "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
     "321"},
    {"call_block",
     "{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}inner{% endcall %}",
     "[inner]"},
    {"call_block_args",
     "{% macro w() %}[{{ caller(5) }}]{% endmacro %}{% call(n) w() %}n={{ n }}{% endcall %}",
     "[n=5]"},
    {"filter_block",
     "{% filter upper %}abc {{ 'd' }}{% endfilter %}",
     "ABC D"},
    {"with_block",
     "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
     "3[]"},
    {"raw_block",
     "{% raw %}\n {{ x }}{% endraw %}\ny",
     "\n {{ x }}y"},
    {"raw_block_whitespace_control",
     "x\n  {%- raw -%}  a  {%- endraw %}\ny",
     "xay"},
    {"comment",
     "a{# hidden #}b",
     "ab"},
    {"trim_blocks_drops_one_newline",
     "{% if true %}\nx\n{% endif %}\ny",
     "x\ny"},
    {"lstrip_blocks_unicode_space",
     "a\n　{% if true %}x{% endif %}",
     "a\nx"},
    {"lstrip_blocks_spaces_tabs",
     "a\n \t{% if true %}x{% endif %}",
     "a\nx"},
    {"lstrip_blocks_not_after_text",
     "a  {% if true %}x{% endif %}",
     "a  x"},
    {"lstrip_blocks_not_for_variables",
     "a\n  {{ 'x' }}",
     "a\n  x"},
    {"comment_trim_and_lstrip",
     "  {# c #}\nx",
     "x"},
    {"plus_disables_trim",
     "{% if true +%}\nx{% endif %}",
     "\nx"},
    {"plus_disables_lstrip",
     "  {%+ if true %}x{% endif %}",
     "  x"},
    {"minus_strips_around",
     "{%- if true -%}\n  a  \n{%- endif -%}\n  b",
     "ab"},
    {"minus_on_variables",
     "{{- ' x ' -}}  \n y",
     " x y"},
    {"mixed_whitespace",
     "  {{ 'a' }}  \n  {% if 1 %}\n  b\n  {% endif %}\n  c\n",
     "  a  \n  b\n  c"},
    {"trailing_newline_dropped",
     "a\nb\n",
     "a\nb"},
    {"crlf_normalized",
     "a\r\nb\r\n\r\n",
     "a\nb\n"},
    {"string_escapes",
     "{{ '\\u00e9\\x41\\n\\q\\t|' }}{{ \"d\\\"q\" }}",
     "éA\n\\q\t|d\"q"},
    {"adjacent_strings",
     "{{ 'a' 'b' \"c\" }}",
     "abc"},
    {"python_str_of_values",
     "{{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.1+0.2 }} {{ 10/2 }} {{ 1e15 }} {{ -0.0 }} {{ none }} {{ true }} {{ n }}",
     "1.0 1e+16 1e-05 0.30000000000000004 5.0 1000000000000000.0 -0.0 None True None"},
    {"python_repr_in_containers",
     "{{ [1,'a',none,true, 1.5, {'k': 'v'}, (1,), u] }} {{ ['it\\'s'] }} {{ ['a\\u00a0b'] }} {{ {'a': {'b': (1, 2)}} }}",
     "[1, 'a', None, True, 1.5, {'k': 'v'}, (1,), Undefined] [\"it's\"] ['a\\xa0b'] {'a': {'b': (1, 2)}}"},
    {"arithmetic",
     "{{ 7 // -2 }} {{ -7 % 3 }} {{ 2**10 }} {{ -2**2 }} {{ 'x' * 3 }} {{ [1] * 2 }} {{ 3 - 1.5 }} {{ 7 / 2 }} {{ 7.5 // 2 }} {{ 7 % 2.5 }} {{ true + 1 }}",
     "-4 2 1024 4 xxx [1, 1] 1.5 3.5 3.0 2.0 2"},
    {"percent_format",
     "{{ '%s-%d' % ('a', 3) }} {{ '%5.2f|%-4d|%03d|%s|%r' % (3.14159, 7, 5, none, 'q') }} {{ '%s' % 'x' }}",
     "a-3  3.14|7   |005|None|'q' x"},
    {"concat_tilde",
     "{{ 'abc' ~ 1 ~ none ~ u ~ [1] }}",
     "abc1None[1]"},
    {"comparisons",
     "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ [1,2] == [1,2] }} {{ (1,2) == [1,2] }} {{ 'a' < 'b' }} {{ u == u }} {{ none == none }}",
     "True True True True False True True True"},
    {"in_operator",
     "{{ 1 in [1,2] }} {{ 'a' in 'cat' }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }} {{ u in [1] }} {{ 1 in u }}",
     "True True True True False False"},
    {"boolean_operators_return_operands",
     "{{ 0 or 'z' }} {{ 1 and 2 }} {{ not 0 }} {{ '' or [] }}|{{ x if false }}|{{ 'x' if 1 else 'y' }}",
     "z 2 True []||x"},
    {"attribute_vs_item",
     "{{ d.items is callable }}|{{ d['items'] }}|{{ d.a }}|{{ d['zz'] }}|{{ {'x': 1}.x }}",
     "True|2|1||1"},
    {"subscripts_and_slices",
     "{{ l[-1] }} {{ l[5] }}| {{ l[1:] }} {{ l[::-1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[::2] }} {{ l[:-1] }} {{ msgs[0]['content'] }} {{ msgs.0.role }}",
     "2 | [1, 2] [2, 1, 3] d él dlröw olléh hlowrd [3, 1]   sys   system"},
    {"undefined_is_falsy_and_empty",
     "{{ u }}|{% if u %}t{% else %}f{% endif %}|{% for x in u %}x{% endfor %}|{{ u|length }}|{{ u is defined }}{{ d.zz is defined }}{{ s.zz is defined }}{{ n is none }}",
     "|f||0|FalseFalseFalseTrue"},
    {"sandbox_hides_mutation",
     "{{ l.append }}|{{ d.update }}|",
     "||"},
    {"filter_trim_upper_lower",
     "{{ '  x\\n'|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }}|{{ 'ÀB'|lower }}|{{ 'ßx'|upper }}|{{ u|trim }}|",
     "x|a|HÉLLO WÖRLD|àb|SSX||"},
    {"filter_capitalize_title",
     "{{ 'hELLO wORLD'|capitalize }} {{ 'a b-c(d [e'|title }} {{ 'they\\'re'|title }}",
     "Hello world A B-C(D [E They're"},
    {"filter_default",
     "{{ x|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x|d('e') }} {{ 0|default('z', boolean=true) }}",
     "d d None e z"},
    {"filter_length_count",
     "{{ l|length }} {{ s|length }} {{ d|count }} {{ 'ab'|count }}",
     "3 11 2 2"},
    {"filter_first_last_list",
     "{{ l|first }} {{ l|last }} {{ []|first }}| {{ 'ab'|list }} {{ d|list }} {{ 'xyz'|last }}",
     "3 2 | ['a', 'b'] ['a', 'items'] z"},
    {"filter_join_map",
     "{{ l|join(',') }} {{ [1,2,3]|map('string')|join }} {{ msgs|map(attribute='role')|join(' ') }} {{ [{'a':1},{'b':2}]|map(attribute='a', default=0)|list }} {{ ['a','b']|map('upper')|list }} {{ msgs|join(', ', attribute='role') }}",
     "3,1,2 123 system user assistant [1, 0] ['A', 'B'] system, user, assistant"},
    {"filter_select_reject",
     "{{ [1,2,3,4]|select('odd')|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ [none, 1, 0]|select|list }} {{ [1,2,3]|select('>', 1)|list }} {{ [1,2]|select('equalto', 2)|list }}",
     "[1, 3] [2, 4] [1] [2, 3] [2]"},
    {"filter_selectattr_rejectattr",
     "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|rejectattr('role', 'eq', 'system')|list|length }} {{ msgs|selectattr('tool_calls', 'defined')|list|length }} {{ msgs|selectattr('tool_calls', 'undefined')|list|length }} {{ msgs|selectattr('content')|list|length }}",
     "['hi'] 2 1 2 3"},
    {"filter_sort_unique_dictsort",
     "{{ [3,1,2]|sort }} {{ ['b','A','a']|sort }} {{ ['b','A','a']|sort(case_sensitive=true) }} {{ [3,1]|sort(reverse=true) }} {{ msgs|sort(attribute='role')|map(attribute='role')|join }} {{ ['b','A','a']|unique|list }} {{ {'b':1,'a':2}|dictsort }} {{ {'b':1,'a':2}|dictsort(by='value') }}",
     "[1, 2, 3] ['A', 'a', 'b'] ['A', 'a', 'b'] [3, 1] assistantsystemuser ['b', 'A'] [('a', 2), ('b', 1)] [('b', 1), ('a', 2)]"},
    {"filter_reverse_items",
     "{{ l|reverse|list }} {{ s|reverse }} {{ d|items|list }} {{ u|items|list }}",
     "[2, 1, 3] dlröw olléh [('a', 1), ('items', 2)] []"},
    {"filter_string_int_float",
     "{{ 5|string ~ 'a' }} {{ 'x'|int }} {{ ' 42 '|int }} {{ '4.7'|int }} {{ 3.9|int }} {{ '1_000'|int }} {{ 'z'|int(7) }} {{ '2.5'|float }} {{ 'q'|float }} {{ 3|float }}",
     "5a 0 42 4 3 1000 7 2.5 0.0 3.0"},
    {"filter_round_abs",
     "{{ 2.5|round }} {{ 3.5|round }} {{ 3|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }} {{ -3|abs }} {{ -2.5|abs }}",
     "2.0 4.0 3 2.67 3.0 2.0 3 2.5"},
    {"filter_indent",
     "{{ 'a\\nb\\n'|indent(2) }}|{{ 'a\\n\\nb'|indent(2, true, true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'x\\n\\ny'|indent }}",
     "a\n  b\n|  a\n  \n  b|a\n> b|x\n\n    y"},
    {"filter_escape_safe",
     "{{ '<&>\\'\"'|e }} {{ '<b>'|escape }} {{ '<b>'|safe }}",
     "&lt;&amp;&gt;&#39;&#34; &lt;b&gt; <b>"},
    {"filter_wordcount_batch",
     "{{ 'hello world, ça va?'|wordcount }} {{ [1,2,3]|batch(2)|list }} {{ [1,2,3]|batch(2, 'x')|list }}",
     "4 [[1, 2], [3]] [[1, 2], [3, 'x']]"},
    {"filter_replace",
     "{{ 'a-b-c'|replace('-', '+') }} {{ 'a-b-c'|replace('-', '', 1) }} {{ 'ab'|replace('', '.') }}",
     "a+b+c ab-c .a.b."},
    {"filter_min_max_sum",
     "{{ [3,1]|max }} {{ [3,1]|min }} {{ [1,2,3]|sum }} {{ ['b','A']|max }} {{ [{'v':2},{'v':5}]|sum(attribute='v') }}",
     "3 1 6 b 7"},
    {"filter_format",
     "{{ '%s=%s'|format('a', 1) }}",
     "a=1"},
    {"tojson_defaults",
     "{{ msgs[2].tool_calls[0].function.arguments|tojson }} {{ [1,[2]]|tojson }} {{ 'a\\tb\\x01\\u2028'|tojson }} {{ 'é😀'|tojson }} {{ 3.0|tojson }} {{ 1e100|tojson }} {{ none|tojson }} {{ {1: 'x', true: 'y'}|tojson }}",
     "{\"x\": 1, \"y\": [1, 2]} [1, [2]] \"a\\tb\\u0001 \" \"é😀\" 3.0 1e+100 null {\"1\": \"y\"}"},
    {"tojson_options",
     "{{ {'z':1,'a':[1,2]}|tojson(sort_keys=true) }} {{ [1,2]|tojson(separators=(',',':')) }} {{ {'é':1.0,'b':none,'c':[],'d':{}}|tojson(indent=2) }} {{ {'a': [1, {'b': 2}]}|tojson(indent=4) }}",
     "{\"a\": [1, 2], \"z\": 1} [1,2] {\n  \"é\": 1.0,\n  \"b\": null,\n  \"c\": [],\n  \"d\": {}\n} {\n    \"a\": [\n        1,\n        {\n            \"b\": 2\n        }\n    ]\n}"},
    {"tests_types",
     "{{ 'a' is string }} {{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.5 is float }} {{ false is boolean }} {{ {} is mapping }} {{ [] is mapping }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ u is iterable }} {{ [] is sequence }} {{ range is callable }} {{ 'x' is callable }}",
     "True True True True False True True True False True False True True True False"},
    {"tests_values",
     "{{ 10 is divisibleby 5 }} {{ 10 is divisibleby(3) }} {{ 3 is odd }} {{ 4 is even }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ none is none }} {{ 1 is sameas 1 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'Abc' is lower }} {{ 2 is in [1,2] }} {{ 'a' is eq 'a' }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is ge 2 }} {{ 1 is not defined }}",
     "True False True True True False True True True True True False True True True True True False"},
    {"str_methods_split_strip",
     "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ ' a b c '.split(none, 1) }} {{ '  x\\n'.strip() }} {{ 'xxaxx'.strip('x') }} {{ 'abc'.lstrip('a') }} {{ 'abc\\n\\n'.rstrip('\\n') }} {{ '\\u3000x\\u3000'.strip() }}",
     "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] ['a', 'b c '] x a bc abc x"},
    {"str_methods_affix_case",
     "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x','lo')) }} {{ 'they\\'re bill'.title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'aB'.swapcase() }}",
     "True True They'Re Bill Hello world AB ab Ab"},
    {"str_methods_misc",
     "{{ 'a-b'.replace('-', '+') }} {{ '{} and {}'.format(1, 'b') }} {{ '{0}{name}'.format('x', name='y') }} {{ 'banana'.find('an') }} {{ 'banana'.rfind('an') }} {{ 'banana'.count('an') }} {{ ','.join(['a','b']) }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '5'.zfill(3) }}",
     "a+b 1 and b xy 1 3 2 a,b True True True ['a', 'b', 'c'] 005"},
    {"str_split_think",
     "{{ '<think>\\nx\\n</think>\\n\\nHello!'.split('</think>')[-1].lstrip('\\n') }}|{{ '<think>\\nx\\n</think>\\n\\nHello!'.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     "Hello!|x"},
    {"dict_methods",
     "{{ {'a':1}.get('a') }} {{ {'a':1}.get('b') }} {{ {'a':1}.get('b', 2) }} {{ {'a':1}.keys()|list }} {{ {'a':1}.values()|list }} {{ {'a':1}.items()|list }}",
     "1 None 2 ['a'] [1] [('a', 1)]"},
    {"list_methods",
     "{{ [1,2,1].count(1) }} {{ [1,2].index(2) }}",
     "2 1"},
    {"globals",
     "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(3, 0, -1)|list }} {{ dict(a=1) }} {{ namespace(x=1).x }} {% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }} {% set j = joiner('|') %}{{ j() }}a{{ j() }}b",
     "[0, 1, 2] [1, 4, 7] [3, 2, 1] {'a': 1} 1 abab a|b"},
    {"strftime_now",
     "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %A %B %j %-d %H:%M:%S %p %a %y') }}",
     "26 Jul 2024 2024-07-26 Friday July 208 26 12:00:00 PM Fri 24"},
    {"unicode_len_and_index",
     "{{ '😀é'|length }} {{ '😀é'[0] }} {{ '😀é'[1] }} {{ '😀éx'[1:] }}",
     "2 😀 é éx"},
    {"messages_pattern_llama",
     "{% set loop_messages = msgs %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = '<s>' + content %}{% endif %}{{ content }}{% endfor %}",
     "<s><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>"},
    {"messages_pattern_qwen",
     "{%- for message in msgs %}\n    {%- if message.role == 'assistant' and message.tool_calls %}\n        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}\n        {%- endfor %}\n    {%- endif %}\n{%- endfor %}",
     "\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": [1, 2]}}\n</tool_call>"},
};
// clang-format on

Context context_from_json(std::string_view text) {
  Context ctx;
  auto doc = json::parse(text);
  EXPECT_TRUE(doc.ok());
  if (!doc) return ctx;
  for (const json::Member& m : doc->as_object()) ctx.set(m.key, Value::from_json(m.value));
  return ctx;
}

RenderOptions fixed_now() {
  RenderOptions o;
  o.now = CivilTime{2024, 7, 26, 12, 0, 0};
  return o;
}

// Renders `tmpl`; the output, or "ERROR: <message>".
std::string render(std::string_view tmpl, const Context& ctx = {},
                   const RenderOptions& options = fixed_now(), ErrorDetail* detail = nullptr) {
  auto t = Template::compile(tmpl, detail);
  if (!t) return "ERROR: " + t.error().message;
  auto out = t->render(ctx, options, detail);
  if (!out) return "ERROR: " + out.error().message;
  return out->text;
}

TEST(JinjaEngineTest, MatchesPythonJinja2) {
  const Context ctx = context_from_json(kContext);
  for (const PythonCase& c : kPythonCases) {
    EXPECT_EQ(render(c.tmpl, ctx), c.expected) << c.name << ": " << c.tmpl;
  }
}

TEST(JinjaEngineTest, SyntaxErrorsCarryLineAndColumn) {
  ErrorDetail d;
  auto t = Template::compile("line one\n{% for x in %}\n{% endfor %}", &d);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidValue);
  EXPECT_EQ(d.kind, ErrorKind::kSyntax);
  EXPECT_EQ(d.line, 2);
  EXPECT_EQ(d.column, 13);
  EXPECT_NE(t.error().message.find("line 2, column 13"), std::string::npos) << t.error().message;

  for (const char* bad : {"{% if x %}", "{% endfor %}", "{{ (1 }}", "{% for %}", "{{ 'open",
                          "{# never closed", "{% set %}", "{{ a | }}", "{% elif x %}",
                          "{{ 1 +* 2 }}", "{% macro m(a=1, b) %}{% endmacro %}"}) {
    d = {};
    auto r = Template::compile(bad, &d);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(d.kind, ErrorKind::kSyntax) << bad;
    EXPECT_GE(d.line, 1) << bad;
  }
}

TEST(JinjaEngineTest, UnsupportedConstructsAreNamed) {
  for (const char* tmpl :
       {"{% include 'x' %}", "{% extends 'base' %}", "{% block b %}{% endblock %}",
        "{% import 'm' as m %}", "{{ x | nosuchfilter }}", "{{ x is nosuchtest }}",
        "{% for x in y recursive %}{% endfor %}"}) {
    ErrorDetail d;
    auto t = Template::compile(tmpl, &d);
    ASSERT_FALSE(t.ok()) << tmpl;
    EXPECT_EQ(t.error().code, ErrorCode::kUnsupported) << tmpl;
    EXPECT_EQ(d.kind, ErrorKind::kUnsupported) << tmpl;
  }
  ErrorDetail d;
  ASSERT_FALSE(Template::compile("{% include 'x' %}", &d).ok());
  EXPECT_NE(d.text.find("include"), std::string::npos) << d.text;
  ASSERT_FALSE(Template::compile("{{ x | nosuchfilter }}", &d).ok());
  EXPECT_NE(d.text.find("nosuchfilter"), std::string::npos) << d.text;
}

TEST(JinjaEngineTest, RaiseExceptionCarriesTheTemplatesMessage) {
  ErrorDetail d;
  const std::string out = render(
      "{% if messages|length > 1 %}{{ raise_exception('Conversation roles must alternate') }}"
      "{% endif %}",
      context_from_json(R"({"messages": [1, 2]})"), fixed_now(), &d);
  EXPECT_EQ(out, "ERROR: Conversation roles must alternate");
  EXPECT_EQ(d.kind, ErrorKind::kRaised);
  EXPECT_EQ(d.text, "Conversation roles must alternate");
  EXPECT_EQ(d.line, 1);
}

// Found by fuzz_jinja: raise_exception() and raise_exception('') gave an error with no text.
TEST(JinjaEngineTest, RaiseExceptionWithoutAMessageStillSaysWhat) {
  for (const char* tmpl : {"{{ raise_exception() }}", "{{ raise_exception('') }}",
                           "{{ raise_exception('' ~ '') if true }}"}) {
    ErrorDetail d;
    render(tmpl, context_from_json("{}"), fixed_now(), &d);
    EXPECT_EQ(d.kind, ErrorKind::kRaised) << tmpl;
    EXPECT_EQ(d.text, "the chat template raised an exception without a message") << tmpl;
  }
}

TEST(JinjaEngineTest, RuntimeErrorsAreTyped) {
  struct Expect {
    const char* tmpl;
    ErrorKind kind;
  };
  for (const Expect& e :
       {Expect{"{{ 1 + 'a' }}", ErrorKind::kType}, Expect{"{{ 'a' + 1 }}", ErrorKind::kType},
        Expect{"{{ 1 / 0 }}", ErrorKind::kType},
        Expect{"{{ 'abc'.nope() }}", ErrorKind::kUndefined},
        Expect{"{{ [1].append(2) }}", ErrorKind::kType}, Expect{"{{ 1 < 'a' }}", ErrorKind::kType},
        Expect{"{% for x in 5 %}{% endfor %}", ErrorKind::kType},
        Expect{"{% set a, b = [1] %}", ErrorKind::kType},
        Expect{"{% set x = 1 %}{% set x.y = 2 %}", ErrorKind::kType},
        Expect{"{{ none() }}", ErrorKind::kType}, Expect{"{{ u.attr }}", ErrorKind::kUndefined},
        Expect{"{{ u['k'] }}", ErrorKind::kUndefined}, Expect{"{{ u + 1 }}", ErrorKind::kUndefined},
        Expect{"{{ u() }}", ErrorKind::kUndefined},
        Expect{"{{ u.strip() }}", ErrorKind::kUndefined},
        Expect{"{{ strftime_now('%Y') }}", ErrorKind::kUnsupported}}) {
    ErrorDetail d;
    RenderOptions no_date;  // strftime_now needs a date
    const std::string out = render(e.tmpl, {}, no_date, &d);
    EXPECT_TRUE(out.starts_with("ERROR: ")) << e.tmpl << " gave " << out;
    EXPECT_EQ(d.kind, e.kind) << e.tmpl << ": " << d.text;
  }
  ErrorDetail d;
  render("ok\n  {{ messages[0].nope.deeper }}", context_from_json(R"({"messages": [{}]})"),
         fixed_now(), &d);
  EXPECT_EQ(d.kind, ErrorKind::kUndefined);
  EXPECT_EQ(d.line, 2);
  EXPECT_NE(d.text.find("messages[0].nope"), std::string::npos) << d.text;
}

TEST(JinjaEngineTest, LimitsStopRunawayTemplates) {
  RenderOptions o = fixed_now();
  o.limits.max_output_bytes = 1000;
  ErrorDetail d;
  EXPECT_TRUE(
      render("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", {}, o, &d).starts_with("ERROR"));
  EXPECT_EQ(d.kind, ErrorKind::kLimit);

  o = fixed_now();
  o.limits.max_loop_iterations = 5000;
  EXPECT_TRUE(render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                     {}, o, &d)
                  .starts_with("ERROR"));
  EXPECT_EQ(d.kind, ErrorKind::kLimit);

  EXPECT_TRUE(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", {}, fixed_now(), &d)
                  .starts_with("ERROR"));
  EXPECT_EQ(d.kind, ErrorKind::kLimit);

  EXPECT_TRUE(render("{{ 'x' * 100000000000 }}", {}, fixed_now(), &d).starts_with("ERROR"));
  EXPECT_EQ(d.kind, ErrorKind::kLimit);

  EXPECT_TRUE(render("{{ range(1000000)|length }}", {}, fixed_now(), &d).starts_with("ERROR"));

  // Deep nesting is refused at parse time rather than overflowing the stack.
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "(";
  EXPECT_FALSE(Template::compile("{{ " + deep + " }}").ok());
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_FALSE(Template::compile(nots + "x }}").ok());
}

TEST(JinjaEngineTest, GenerationBlocksRenderTheirBody) {
  EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(JinjaEngineTest, ReportsStrftimeNowAndContentLoops) {
  EXPECT_TRUE(Template::compile("{{ strftime_now('%Y') }}")->uses_strftime_now());
  EXPECT_TRUE(
      Template::compile("{% if strftime_now is defined %}x{% endif %}")->uses_strftime_now());
  EXPECT_FALSE(Template::compile("{{ date_string }}")->uses_strftime_now());
  EXPECT_TRUE(Template::compile("{% for m in messages %}{% for p in m['content'] %}{% endfor %}"
                                "{% endfor %}")
                  ->iterates_content());
  EXPECT_TRUE(Template::compile("{% for p in message.content %}{% endfor %}")->iterates_content());
  EXPECT_FALSE(Template::compile("{{ message.content }}")->iterates_content());
}

TEST(JinjaEngineTest, ProvenanceFollowsStringsThroughTrimSliceAndConcat) {
  Context ctx;
  const SourceId user = ctx.add_source("messages[1].content");
  const SourceId tools = ctx.add_source("tools[0]");
  ctx.set("content", Value("  Hello world  ", user));
  ctx.set("tool", Value::dict({{"name", Value("f")}}, tools));
  auto t = Template::compile(
      "<{{ content | trim }}>[{{ '<' + content[2:7] + '>' }}]{{ tool | tojson }}");
  ASSERT_TRUE(t.ok());
  auto out = t->render(ctx);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->text, "<Hello world>[<Hello>]{\"name\": \"f\"}");
  ASSERT_EQ(out->spans.size(), 3u);
  EXPECT_EQ(out->spans[0].begin, 1u);
  EXPECT_EQ(out->spans[0].end, 12u);
  EXPECT_EQ(out->spans[0].source, user);
  EXPECT_EQ(out->spans[0].source_offset, 2u);  // after the two trimmed spaces
  EXPECT_EQ(out->text.substr(out->spans[1].begin, out->spans[1].end - out->spans[1].begin),
            "Hello");
  EXPECT_EQ(out->spans[1].source, user);
  EXPECT_EQ(out->spans[2].source, tools);
  EXPECT_EQ(out->spans[2].end, out->text.size());
  for (const ProvenanceSpan& s : out->spans) {
    EXPECT_LT(s.begin, s.end);
  }
}

TEST(JinjaEngineTest, CompiledTemplateRendersRepeatedlyWithDifferentContexts) {
  auto t = Template::compile(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ "
      "ns.n }}");
  ASSERT_TRUE(t.ok());
  for (int n = 0; n < 3; ++n) {
    Context ctx;
    std::vector<Value> messages(static_cast<std::size_t>(n), Value("m"));
    ctx.set("messages", Value::list(std::move(messages)));
    auto out = t->render(ctx);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->text, std::to_string(n));
  }
}

TEST(JinjaEngineTest, JsonNumbersBecomePythonIntOrFloat) {
  auto doc = json::parse(R"({"i": 10, "f": 1.50, "e": 1e2, "big": 12345678901234567890})");
  ASSERT_TRUE(doc.ok());
  Context ctx;
  ctx.set("d", Value::from_json(*doc));
  EXPECT_EQ(render("{{ d.i }} {{ d.f }} {{ d.e }} {{ d|tojson }}", ctx),
            "10 1.5 100.0 {\"i\": 10, \"f\": 1.5, \"e\": 100.0, \"big\": 1.2345678901234567e+19}");
}

}  // namespace
}  // namespace prefixgate::canon::jinja
