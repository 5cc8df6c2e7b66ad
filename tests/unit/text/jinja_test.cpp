// Unit tests of the jinja interpreter's details: whitespace control, operators with Python
// semantics, value printing, scoping, filters and tests, error messages. Expected strings are
// what Python jinja2 3.1 (in Hugging Face's configuration) gives for the same template.
#include <gtest/gtest.h>

#include <string>

#include "sluice/chat_template.h"
#include "sluice/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace sluice::jinja {
namespace {

std::string render(const std::string& source) {
  Template t(source);
  auto globals = std::make_shared<Frame>();
  return t.render(globals);
}

std::string error_of(const std::string& source) {
  try {
    render(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaLexer, WhitespaceControlAndTrimBlocks) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");     // lstrip_blocks
  EXPECT_EQ(render("  {{ 'x' }}"), "  x");                   // not for variables
  EXPECT_EQ(render("a {% if true %}x{% endif %}"), "a x");   // not at line start
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");  // + disables lstrip
  EXPECT_EQ(render("x\n"), "x");                             // one trailing newline dropped
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("a{# c #}\nb"), "ab");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(JinjaLexer, StringEscapes) {
  EXPECT_EQ(render(R"({{ 'a\nb\t\'"\u00e9\x41' }})"),
            "a\nb\t'\"\xc3\xa9"
            "A");
  EXPECT_EQ(render(R"({{ "x" 'y' }})"), "xy");
}

TEST(JinjaValues, PythonPrinting) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, (1,), {'k': \"it's\"}] }}"),
            "[1, 'a', None, True, 1.5, (1,), {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ 1.0 }} {{ 0.1 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456.789 }} {{ 4/2 }}"),
            "1.0 0.1 1e+16 1e-05 123456.789 2.0");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(string_repr("a\nb\\"), "'a\\nb\\\\'");
}

TEST(JinjaOperators, PythonArithmetic) {
  EXPECT_EQ(render("{{ 7 // -2 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ 2 ** 3 ** 2 }} {{ 10 ** -1 }}"),
            "-4 2 3.0 64 0.1");
  EXPECT_EQ(render("{{ 'ab' * 2 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }} {{ true + 1 }}"),
            "abab [1, 2] a1None 2");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' in 'abc' }} {{ 1 not in [1] }}"),
            "True False True False");
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }} {{ none or 'x' }} {{ 0 and 1 }}"),
            "True False x 0");
}

TEST(JinjaOperators, TypeErrorsCarryPythonMessages) {
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{{ 1 + 'a' }}"), "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{{ 1 < 'a' }}"), "'<' not supported between instances of 'int' and 'str'");
  EXPECT_EQ(error_of("{% for x in none %}{% endfor %}"), "'NoneType' object is not iterable");
  EXPECT_EQ(error_of("{{ x.y }}"), "'x' is undefined");
  EXPECT_EQ(error_of("{{ [].append(1) }}"),
            "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ x | nosuch }}"), "No filter named 'nosuch'.");
  EXPECT_EQ(
      error_of("{% if x %}"),
      "Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or "
      "'endif'. The innermost block that needs to be closed is 'if'.");
}

TEST(JinjaStatements, LoopsAndScoping) {
  EXPECT_EQ(
      render(
          "{% for x in [1,2,3] %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}"
          "{{ loop.previtem }}{{ loop.cycle('a','b') }};{% endfor %}"),
      "1TrueFalse3a;2FalseFalse21b;3FalseTrue12a;");
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor "
                   "%}{{ x }}"),
            "01010");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1,2] %}{% set ns.n = ns.n + i %}{% "
                   "endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"),
            "2242");
  EXPECT_EQ(
      render("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
      "13");
  EXPECT_EQ(
      render("{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
      "1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"),
            "a=1,b=2,");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}x{{ 1 }}{% endset %}[{{ t }}]"), "[x1]");
}

TEST(JinjaStatements, MacrosCallAndFilterBlocks) {
  EXPECT_EQ(render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                   "{{ m(1) }}{{ m(1, 3, 4) }}{{ m(1, c=5) }}"),
            "12(){}13(4,){}12(){'c': 5}");
  EXPECT_EQ(render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"),
            "<in>");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(render("{{ 'x' if false }}|{{ 'y' if true else 'z' }}"), "|y");
}

TEST(JinjaFilters, Common) {
  EXPECT_EQ(render("{{ {'b': 'é', 'a': [1, 2.0]} | tojson }}"), "{\"b\": \"é\", \"a\": [1, 2.0]}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(
      render(
          "{{ [1] | tojson(separators=(',', ':')) }}{{ {'b':1,'a':2} | tojson(sort_keys=true) }}"),
      "[1]{\"a\": 2, \"b\": 1}");
  EXPECT_EQ(render("{{ '  x ' | trim }}|{{ none | string }}|{{ x | default('d') }}|{{ '' | "
                   "default('e', true) }}"),
            "x|None|d|e");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort | join(',') }} {{ [1, 2] | first }} {{ 'abc' | last }} {{ "
                   "[1,1,2] | unique | list }}"),
            "1,2,3 1 c [1, 2]");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}] | selectattr('r', 'equalto', 'a') | list }}"),
            "[{'r': 'a'}]");
  EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}] | map(attribute='r') | join }}"), "ua");
  EXPECT_EQ(
      render("{{ 'hello world-foo' | title }} {{ 'aBc' | capitalize }} {{ 'a\nb' | indent(2) }}"),
      "Hello World-Foo Abc a\n  b");
  EXPECT_EQ(
      render(
          "{{ {'b': 1, 'a': 2} | dictsort }} {{ '3.7' | int }} {{ 'x' | int }} {{ 2.5 | round }}"),
      "[('a', 2), ('b', 1)] 3 0 2.0");
  EXPECT_EQ(render("{{ \"'\" | safe + '<' }}"), "'&lt;");
  EXPECT_EQ(render("{{ [1, 2] | map('string') | list }} {{ 'a b  c' | wordcount }}"),
            "['1', '2'] 3");
}

TEST(JinjaTests, Builtin) {
  EXPECT_EQ(render("{{ x is defined }}{{ x is sequence }}{{ none is none }}{{ 'a' is string }}{{ "
                   "{} is mapping }}"),
            "FalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ true is integer }}{{ true is number }}{{ 1.0 is float }}{{ 3 is divisibleby "
                   "3 }}{{ 3 is odd }}"),
            "FalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 2 is in [1, 2] }}{{ 1 is not eq 1 }}{{ 'x' is lower }}"), "TrueFalseTrue");
}

TEST(JinjaMethods, StringDictList) {
  EXPECT_EQ(
      render("{{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }}"),
      "['a', 'b', 'c'] ['a', 'b,c'] ['a,b', 'c']");
  EXPECT_EQ(render("{{ 'xxaxx'.strip('x') }} {{ ' a '.lstrip() }}| {{ 'abc'.startswith(('x', 'a')) "
                   "}} {{ 'abc'.endswith('c') }}"),
            "a a | True True");
  EXPECT_EQ(render("{{ '{}-{name}-{:>3}'.format(1, 2, name=3) }} {{ 'a-b'.replace('-', '+') }} {{ "
                   "'abc'.upper() }}"),
            "1-3-  2 a+b ABC");
  EXPECT_EQ(error_of("{{ '{}{0}'.format(1) }}"),
            "cannot switch from manual field specification to automatic field numbering");
  EXPECT_EQ(render("{{ {'a': 1}.get('b') }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1}.keys() | list "
                   "}} {{ [1, 2].index(2) }}"),
            "None 2 ['a'] 1");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][-2:] }} {{ 'héllo'[1] }}"),
            "bcd cba [2, 3] é");
}

TEST(ChatTemplate, RendersLikeHuggingFace) {
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.bos_token = "<s>";
  options.now = "2026-01-15T10:00:00";
  std::string tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
      "{% if tools is none %}no tools{% endif %}{% if add_generation_prompt %}<assistant>{% endif "
      "%}"
      "{{ strftime_now('%d %b %Y') }}";
  EXPECT_EQ(render_chat_template(tmpl, R"([{"role":"user","content":"Hi 😀"}])", options),
            "<s><user>Hi 😀\nno tools<assistant>15 Jan 2026");
  try {
    render_chat_template("{{ raise_exception('bad role') }}", "[]", options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad role");
  }
}

}  // namespace
}  // namespace sluice::jinja
