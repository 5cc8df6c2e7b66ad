// Recursive-descent parser mirroring jinja2/parser.py: statements (if, for, set, macro, call,
// filter, with, break/continue, transformers' `generation`) and the expression grammar. Error
// messages reproduce jinja2's wording because templates' syntax errors are part of parity.
#include "text/jinja/parser.h"

#include <algorithm>

#include "core/error.h"

namespace sluice::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Name:
    case Tok::Op:
      return t.text;
    case Tok::Data:
      return "template data / text";
    case Tok::VarBegin:
      return "begin of print statement";
    case Tok::VarEnd:
      return "end of print statement";
    case Tok::BlockBegin:
      return "begin of statement block";
    case Tok::BlockEnd:
      return "end of statement block";
    case Tok::String:
      return "string";
    case Tok::Integer:
      return "integer";
    case Tok::Float:
      return "float";
    case Tok::Eof:
      return "end of template";
  }
  return "?";
}

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const ParseOptions& options)
      : t_(tokens), opt_(options) {}

  StmtList parse_template() { return subparse({}); }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail_expected(std::string(op));
    ++i_;
  }
  void expect(Tok type, std::string_view what) {
    if (cur().type != type) fail_expected(std::string(what));
    ++i_;
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail_expected("name");
    return next().text;
  }
  [[noreturn]] void fail_expected(const std::string& what) {
    if (cur().type == Tok::Eof) fail("unexpected end of template, expected '", what, "'.");
    fail("expected token '", what, "', got '", describe(cur()), "'");
  }

  // Statements until a block tag whose name is in `end`; leaves the cursor on that name.
  StmtList subparse(const std::vector<std::string>& end) {
    StmtList body;
    if (!end.empty()) end_stack_.push_back(end);
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Data;
        s->text = t.text;
        s->line = t.line;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.type == Tok::VarBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Output;
        s->line = t.line;
        s->expr = parse_tuple(false, true, {}, false);
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        ++i_;
        if (!end.empty() && cur().type == Tok::Name &&
            std::find(end.begin(), end.end(), cur().text) != end.end()) {
          end_stack_.pop_back();
          return body;
        }
        body.push_back(parse_statement());
      } else if (t.type == Tok::Eof) {
        if (!end.empty()) fail_unknown_tag(nullptr);
        return body;
      } else {
        fail("unexpected '", describe(t), "'");
      }
    }
  }

  [[noreturn]] void fail_unknown_tag(const std::string* name) {
    std::string message =
        name ? "Encountered unknown tag '" + *name + "'." : "Unexpected end of template.";
    if (!end_stack_.empty()) {
      bool expected = false;
      for (const auto& level : end_stack_) {
        if (name && std::find(level.begin(), level.end(), *name) != level.end()) expected = true;
      }
      std::string looking;
      for (const auto& tag : end_stack_.back())
        looking += (looking.empty() ? "'" : " or '") + tag + "'";
      if (expected) {
        message +=
            " You probably made a nesting mistake. Jinja is expecting this tag, but currently "
            "looking for " +
            looking + ".";
      } else {
        message += " Jinja was looking for the following tags: " + looking + ".";
      }
    }
    if (!tag_stack_.empty())
      message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(message);
  }

  StmtPtr new_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  StmtPtr parse_statement() {
    if (cur().type != Tok::Name) fail("tag name expected");
    std::string tag = cur().text;
    int line = cur().line;
    static const std::vector<std::string> kTags = {
        "if", "for", "set", "macro", "call", "filter", "with", "break", "continue", "generation"};
    if (std::find(kTags.begin(), kTags.end(), tag) == kTags.end()) fail_unknown_tag(&tag);
    ++i_;
    tag_stack_.push_back(tag);
    StmtPtr s;
    if (tag == "if")
      s = parse_if(line);
    else if (tag == "for")
      s = parse_for(line);
    else if (tag == "set")
      s = parse_set(line);
    else if (tag == "macro")
      s = parse_macro(line);
    else if (tag == "call")
      s = parse_call_block(line);
    else if (tag == "filter")
      s = parse_filter_block(line);
    else if (tag == "with")
      s = parse_with(line);
    else if (tag == "generation")
      s = parse_scope(line, "endgeneration");
    else {
      s = new_stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, line);
      expect(Tok::BlockEnd, "end of statement block");
    }
    tag_stack_.pop_back();
    return s;
  }

  // After subparse stopped on an end name: consume it and the closing %}.
  void end_block() {
    ++i_;
    expect(Tok::BlockEnd, "end of statement block");
  }

  StmtPtr parse_if(int line) {
    bool saved = soft_;
    soft_ = true;
    auto s = new_stmt(StmtKind::If, line);
    s->expr = parse_tuple(false, false, {}, false);
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"elif", "else", "endif"});
    std::string which = cur().text;
    ++i_;
    if (which == "elif") {
      s->else_body.push_back(parse_if(cur().line));
    } else if (which == "else") {
      expect(Tok::BlockEnd, "end of statement block");
      s->else_body = subparse({"endif"});
      end_block();
    } else {
      expect(Tok::BlockEnd, "end of statement block");
    }
    soft_ = saved;
    return s;
  }

  StmtPtr parse_for(int line) {
    bool saved = soft_;
    soft_ = false;
    auto s = new_stmt(StmtKind::For, line);
    s->target = parse_assign_target(true, {"in"});
    if (!skip_name("in")) fail_expected("in");
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    s->recursive = skip_name("recursive");
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"endfor", "else"});
    if (cur().text == "else") {
      end_block();
      s->else_body = subparse({"endfor"});
    }
    end_block();
    soft_ = saved;
    return s;
  }

  StmtPtr parse_set(int line) {
    auto s = new_stmt(StmtKind::Set, line);
    if (cur().type == Tok::Name && look().type == Tok::Op && look().text == ".") {
      auto ns = make(ExprKind::Getattr, line);
      auto base = make(ExprKind::Name, line);
      base->name = next().text;
      ++i_;
      ns->name = expect_name();
      ns->a = std::move(base);
      s->target = std::move(ns);
    } else {
      s->target = parse_assign_target(true, {});
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(false, true, {}, false);
      expect(Tok::BlockEnd, "end of statement block");
      return s;
    }
    s->kind = StmtKind::SetBlock;
    if (is_op("|")) s->filter = parse_filter(nullptr, false);
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"endset"});
    end_block();
    return s;
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      s.params.push_back(expect_name());
      s.defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
    expect_op(")");
  }

  StmtPtr parse_macro(int line) {
    bool saved = soft_;
    soft_ = false;
    auto s = new_stmt(StmtKind::Macro, line);
    s->name = expect_name();
    parse_signature(*s);
    expect(Tok::BlockEnd, "end of statement block");
    int varargs_before = varargs_seen_, kwargs_before = kwargs_seen_;
    s->body = subparse({"endmacro"});
    s->uses_varargs = varargs_seen_ > varargs_before;
    s->uses_kwargs = kwargs_seen_ > kwargs_before;
    end_block();
    soft_ = saved;
    return s;
  }

  StmtPtr parse_call_block(int line) {
    bool saved = soft_;
    soft_ = false;
    auto s = new_stmt(StmtKind::CallBlock, line);
    if (is_op("(")) parse_signature(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) fail("expected call");
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"endcall"});
    end_block();
    soft_ = saved;
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = new_stmt(StmtKind::FilterBlock, line);
    s->filter = parse_filter(nullptr, true);
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"endfilter"});
    end_block();
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = new_stmt(StmtKind::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      s->params.push_back(expect_name());
      expect_op("=");
      s->defaults.push_back(parse_expression(true));
    }
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({"endwith"});
    end_block();
    return s;
  }

  StmtPtr parse_scope(int line, const std::string& end) {
    auto s = new_stmt(StmtKind::Scope, line);
    expect(Tok::BlockEnd, "end of statement block");
    s->body = subparse({end});
    end_block();
    return s;
  }

  // A name or a tuple of names (for loop targets and set).
  ExprPtr parse_assign_target(bool with_tuple, const std::vector<std::string>& extra_end) {
    ExprPtr target = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    auto check = [](const Expr& e) {
      if (e.kind != ExprKind::Name)
        fail("can't assign to '", e.kind == ExprKind::Const ? "const" : "expression", "'");
    };
    if (target->kind == ExprKind::Tuple) {
      for (auto& item : target->items) check(*item);
    } else {
      check(*target);
    }
    return target;
  }

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
    return cur().type == Tok::Name &&
           std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      const std::vector<std::string>& extra_end, bool explicit_parentheses) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) fail("Expected an expression, got '", describe(cur()), "'");
    }
    auto t = make(ExprKind::Tuple, line);
    t->items = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = next().line;
      bool saved = soft_;
      soft_ = true;
      auto c = make(ExprKind::CondExpr, line);
      c->a = parse_or();
      if (skip_name("else")) c->c = parse_condexpr();
      c->b = std::move(expr);
      expr = std::move(c);
      soft_ = saved;
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, ExprPtr a, ExprPtr b, std::string op, int line) {
    auto e = make(kind, line);
    e->a = std::move(a);
    e->b = std::move(b);
    e->name = std::move(op);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = next().line;
      left = binary(ExprKind::Or, std::move(left), parse_and(), "or", line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = next().line;
      left = binary(ExprKind::And, std::move(left), parse_not(), "and", line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = make(ExprKind::Not, next().line);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    auto cmp = make(ExprKind::Compare, line);
    for (;;) {
      if (cur().type == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        cmp->ops.push_back(next().text);
      } else if (is_name("in")) {
        ++i_;
        cmp->ops.push_back("in");
      } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
        i_ += 2;
        cmp->ops.push_back("not in");
      } else {
        break;
      }
      cmp->items.push_back(parse_math1());
    }
    if (cmp->ops.empty()) return first;
    cmp->items.insert(cmp->items.begin(), std::move(first));
    return cmp;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      left = binary(ExprKind::Binary, std::move(left), parse_concat(), op.text, op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      left = binary(ExprKind::Binary, std::move(left), parse_math2(), "~", line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      left = binary(ExprKind::Binary, std::move(left), parse_pow(), op.text, op.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      left = binary(ExprKind::Binary, std::move(left), parse_unary(true), "**", line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      node = make(op.text == "-" ? ExprKind::Neg : ExprKind::Pos, op.line);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr constant(Value v, int line) {
    auto e = make(ExprKind::Const, line);
    e->constant = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::Name) {
      ++i_;
      if (t.text == "true" || t.text == "True") return constant(Value::boolean(true), line);
      if (t.text == "false" || t.text == "False") return constant(Value::boolean(false), line);
      if (t.text == "none" || t.text == "None") return constant(Value::none(), line);
      auto e = make(ExprKind::Name, line);
      e->name = t.text;
      if (t.text == "varargs") ++varargs_seen_;
      if (t.text == "kwargs") ++kwargs_seen_;
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += next().text;
      return constant(Value::string(std::move(s)), line);
    }
    if (t.type == Tok::Integer) return ++i_, constant(Value::integer(t.int_value), line);
    if (t.type == Tok::Float) return ++i_, constant(Value::number(t.float_value), line);
    if (is_op("(")) {
      ++i_;
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) return parse_list();
    if (is_op("{")) return parse_dict();
    if (t.type == Tok::Eof) fail("unexpected end of template");
    fail("unexpected '", describe(t), "'");
  }

  ExprPtr parse_list() {
    auto e = make(ExprKind::List, next().line);
    while (!is_op("]")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("]")) break;
      e->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = make(ExprKind::Dict, next().line);
    while (!is_op("}")) {
      if (!e->items.empty()) expect_op(",");
      if (is_op("}")) break;
      e->items.push_back(parse_expression(true));
      expect_op(":");
      e->items.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == Tok::Name) {
        auto e = make(ExprKind::Getattr, t.line);
        e->a = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != Tok::Integer) fail("expected name or number");
      auto e = make(ExprKind::Getitem, t.line);
      e->a = std::move(node);
      e->b = constant(Value::integer(attr.int_value), t.line);
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make(ExprKind::Getitem, t.line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = make(ExprKind::Tuple, t.line);
      e->b->items = std::move(args);
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    auto slice = make(ExprKind::Slice, line);
    if (!skip_op(":")) {
      ExprPtr start = parse_expression(true);
      if (!skip_op(":")) return start;
      slice->a = std::move(start);
    }
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->b = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) slice->c = parse_expression(true);
    }
    return slice;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (skip_op("*")) {
        e.dyn_args = parse_expression(true);
      } else if (skip_op("**")) {
        e.dyn_kwargs = parse_expression(true);
      } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        std::string key = next().text;
        ++i_;
        e.kwargs.emplace_back(key, parse_expression(true));
      } else {
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::Call, cur().line);
    e->a = std::move(node);
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".")) {
      ++i_;
      name += "." + expect_name();
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) ++i_;
      start_inline = false;
      auto e = make(ExprKind::Filter, cur().line);
      e->name = dotted_name();
      if (!opt_.is_filter(e->name)) {
        if (!soft_) fail("No filter named '", e->name, "'.");
        e->soft_unknown = true;
      }
      if (is_op("(")) parse_call_args(*e);
      e->a = std::move(node);
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto e = make(ExprKind::Test, next().line);
    e->negated = skip_name("not");
    e->name = dotted_name();
    if (!opt_.is_test(e->name)) {
      if (!soft_) fail("No test named '", e->name, "'.");
      e->soft_unknown = true;
    }
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String ||
                cur().type == Tok::Integer || cur().type == Tok::Float || is_op("(") ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    e->a = std::move(node);
    return e;
  }

  const std::vector<Token>& t_;
  const ParseOptions& opt_;
  size_t i_ = 0;
  bool soft_ = false;
  int varargs_seen_ = 0,
      kwargs_seen_ = 0;  // Name nodes seen so far, to mark macros using them  // inside an
                         // if/conditional expression: unknown filters fail only when run
  std::vector<std::vector<std::string>> end_stack_;
  std::vector<std::string> tag_stack_;
};

}  // namespace

StmtList parse(const std::vector<Token>& tokens, const ParseOptions& options) {
  return Parser(tokens, options).parse_template();
}

}  // namespace sluice::jinja
