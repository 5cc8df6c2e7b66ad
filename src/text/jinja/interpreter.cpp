// Tree-walking evaluation of statements and expressions. Control flow (break/continue) is a
// return code, not an exception, so deep templates stay cheap; errors are sluice::Error.
#include "text/jinja/interpreter.h"

#include "core/error.h"
#include "text/jinja/filters.h"
#include "text/jinja/value_ops.h"

namespace sluice::jinja {

const Value* Frame::find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

namespace {

enum class Flow { Normal, Break, Continue };

FramePtr child(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

class Interpreter {
 public:
  Flow exec(const StmtList& body, const FramePtr& frame, std::string& out) {
    for (const auto& s : body) {
      Flow flow = exec_stmt(*s, frame, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    switch (e.kind) {
      case ExprKind::Const:
        return e.constant;
      case ExprKind::Name: {
        const Value* v = frame->find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case ExprKind::List:
      case ExprKind::Tuple: {
        ValueList items;
        for (const auto& item : e.items) items.push_back(eval(*item, frame));
        return Value::list(std::move(items),
                           e.kind == ExprKind::Tuple ? SeqKind::Tuple : SeqKind::List);
      }
      case ExprKind::Dict: {
        auto d = std::make_shared<Dict>();
        for (size_t i = 0; i + 1 < e.items.size(); i += 2)
          d->set(eval(*e.items[i], frame), eval(*e.items[i + 1], frame));
        return Value::dict(std::move(d));
      }
      case ExprKind::Getattr:
        return get_attr(eval(*e.a, frame), e.name);
      case ExprKind::Getitem: {
        Value obj = eval(*e.a, frame);
        if (e.b->kind == ExprKind::Slice) {
          auto part = [&](const ExprPtr& p) { return p ? eval(*p, frame) : Value::none(); };
          return slice(obj, part(e.b->a), part(e.b->b), part(e.b->c));
        }
        return get_item(obj, eval(*e.b, frame));
      }
      case ExprKind::Slice:
        fail("slice outside a subscript");
      case ExprKind::Call:
        return eval_call(e, frame);
      case ExprKind::Filter:
        return eval_filter(e, frame, e.a ? eval(*e.a, frame) : Value());
      case ExprKind::Test: {
        if (e.soft_unknown) fail("No test named '", e.name, "' found.");
        Value target = eval(*e.a, frame);
        CallArgs args = eval_args(e, frame);
        return Value::boolean(apply_test(e.name, target, args) != e.negated);
      }
      case ExprKind::Not:
        return Value::boolean(!eval(*e.a, frame).truthy());
      case ExprKind::Neg:
        return negate(eval(*e.a, frame));
      case ExprKind::Pos: {
        Value v = eval(*e.a, frame);
        if (!v.is_number()) fail("bad operand type for unary +: '", v.type_name(), "'");
        return v.is_bool() ? Value::integer(v.as_int()) : v;
      }
      case ExprKind::Binary:
        return binary_op(e.name, eval(*e.a, frame), eval(*e.b, frame));
      case ExprKind::Compare:
        return Value::boolean(eval_compare(e, frame));
      case ExprKind::And: {
        Value a = eval(*e.a, frame);
        return a.truthy() ? eval(*e.b, frame) : a;
      }
      case ExprKind::Or: {
        Value a = eval(*e.a, frame);
        return a.truthy() ? a : eval(*e.b, frame);
      }
      case ExprKind::CondExpr:
        if (eval(*e.a, frame).truthy()) return eval(*e.b, frame);
        if (e.c) return eval(*e.c, frame);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    return Value();
  }

 private:
  bool eval_compare(const Expr& e, const FramePtr& frame) {
    Value left = eval(*e.items[0], frame);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.items[i + 1], frame);
      const std::string& op = e.ops[i];
      bool ok;
      if (op == "==")
        ok = values_equal(left, right);
      else if (op == "!=")
        ok = !values_equal(left, right);
      else if (op == "<")
        ok = value_less(left, right, op);
      else if (op == ">")
        ok = value_less(right, left, op);
      else if (op == "<=")
        ok = values_equal(left, right) || value_less(left, right, op);
      else if (op == ">=")
        ok = values_equal(left, right) || value_less(right, left, op);
      else if (op == "in")
        ok = contains(right, left);
      else
        ok = !contains(right, left);
      if (!ok) return false;
      left = std::move(right);
    }
    return true;
  }

  CallArgs eval_args(const Expr& e, const FramePtr& frame) {
    CallArgs args;
    for (const auto& a : e.args) args.positional.push_back(eval(*a, frame));
    for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v, frame));
    if (e.dyn_args) {
      for (const Value& v : iterate(eval(*e.dyn_args, frame))) args.positional.push_back(v);
    }
    if (e.dyn_kwargs) {
      Value d = eval(*e.dyn_kwargs, frame);
      if (!d.is_dict()) fail("argument after ** must be a mapping, not ", d.type_name());
      for (const auto& [k, v] : d.dict_ref().items) args.keyword.emplace_back(k.to_str(), v);
    }
    return args;
  }

  Value eval_call(const Expr& e, const FramePtr& frame) {
    Value callee = eval(*e.a, frame);
    CallArgs args = eval_args(e, frame);
    return call_value(callee, args);
  }

  static Value call_value(const Value& callee, CallArgs& args) {
    if (callee.is_function()) return callee.function_ref().call(args);
    if (callee.is_undefined()) fail_undefined(callee);
    fail("'", callee.type_name(), "' object is not callable");
  }

  Value eval_filter(const Expr& e, const FramePtr& frame, Value target) {
    if (e.soft_unknown) fail("No filter named '", e.name, "' found.");
    CallArgs args = eval_args(e, frame);
    return apply_filter(e.name, target, args);
  }

  // A filter chain whose innermost filter has no target gets `input` there.
  Value apply_filter_chain(const Expr& e, const FramePtr& frame, Value input) {
    Value target = e.a ? apply_filter_chain(*e.a, frame, std::move(input)) : std::move(input);
    return eval_filter(e, frame, std::move(target));
  }

  static void unpack(const Expr& target, const Value& v, Frame& frame) {
    if (target.kind == ExprKind::Name) {
      frame.vars[target.name] = v;
      return;
    }
    if (!v.is_list() && !v.is_string() && !v.is_dict() && !v.is_undefined())
      fail("cannot unpack non-iterable ", v.type_name(), " object");
    ValueList items = iterate(v);
    size_t want = target.items.size();
    if (items.size() < want)
      fail("not enough values to unpack (expected ", want, ", got ", items.size(), ")");
    if (items.size() > want) fail("too many values to unpack (expected ", want, ")");
    for (size_t i = 0; i < want; ++i) frame.vars[target.items[i]->name] = items[i];
  }

  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
    switch (s.kind) {
      case StmtKind::Data:
        out += s.text;
        return Flow::Normal;
      case StmtKind::Output:
        out += eval(*s.expr, frame).to_str();
        return Flow::Normal;
      case StmtKind::If:
        return exec(eval(*s.expr, frame).truthy() ? s.body : s.else_body, frame, out);
      case StmtKind::For:
        exec_for(s, frame, out);
        return Flow::Normal;
      case StmtKind::Set:
        exec_set(s, frame, eval(*s.expr, frame));
        return Flow::Normal;
      case StmtKind::SetBlock: {
        std::string text;
        exec(s.body, child(frame), text);
        Value v = Value::string(std::move(text));
        if (s.filter) v = apply_filter_chain(*s.filter, frame, std::move(v));
        exec_set(s, frame, std::move(v));
        return Flow::Normal;
      }
      case StmtKind::Macro:
        frame->vars[s.name] = make_macro(s, frame, s.name);
        return Flow::Normal;
      case StmtKind::CallBlock: {
        Value callee = eval(*s.expr->a, frame);
        CallArgs args = eval_args(*s.expr, frame);
        args.keyword.emplace_back("caller", make_macro(s, frame, "caller"));
        out += call_value(callee, args).to_str();
        return Flow::Normal;
      }
      case StmtKind::FilterBlock: {
        std::string text;
        exec(s.body, child(frame), text);
        out += apply_filter_chain(*s.filter, frame, Value::string(std::move(text))).to_str();
        return Flow::Normal;
      }
      case StmtKind::With: {
        FramePtr inner = child(frame);
        for (size_t i = 0; i < s.params.size(); ++i)
          inner->vars[s.params[i]] = eval(*s.defaults[i], frame);
        return exec(s.body, inner, out);
      }
      case StmtKind::Scope:
        return exec(s.body, child(frame), out);
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  void exec_set(const Stmt& s, const FramePtr& frame, Value v) {
    if (s.target->kind == ExprKind::Getattr) {
      const Value* ns = frame->find(s.target->a->name);
      if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object");
      std::shared_ptr<Dict> d = ns->dict_ptr();
      d->set(Value::string(s.target->name), std::move(v));
      return;
    }
    unpack(*s.target, v, *frame);
  }

  void exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
    if (s.recursive) fail("recursive for loops are not supported");
    ValueList items = iterate(eval(*s.expr, frame));
    if (s.filter) {
      ValueList kept;
      for (const Value& item : items) {
        FramePtr probe = child(frame);
        unpack(*s.target, item, *probe);
        if (eval(*s.filter, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, child(frame), out);
      return;
    }
    auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      FramePtr inner = child(frame);
      unpack(*s.target, items[static_cast<size_t>(i)], *inner);
      inner->vars["loop"] = loop_object(items, i);
      if (exec(s.body, inner, out) == Flow::Break) break;
    }
  }

  static Value loop_object(const ValueList& items, int64_t i) {
    auto n = static_cast<int64_t>(items.size());
    auto d = std::make_shared<Dict>();
    auto put = [&](const char* k, Value v) {
      d->items.emplace_back(Value::string(k), std::move(v));
    };
    put("index", Value::integer(i + 1));
    put("index0", Value::integer(i));
    put("revindex", Value::integer(n - i));
    put("revindex0", Value::integer(n - i - 1));
    put("first", Value::boolean(i == 0));
    put("last", Value::boolean(i == n - 1));
    put("length", Value::integer(n));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem",
        i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    put("nextitem",
        i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    put("cycle", Value::function("loop.cycle", [i](CallArgs& a) {
          if (a.positional.empty()) fail("no items for cycling given");
          return a.positional[static_cast<size_t>(i) % a.positional.size()];
        }));
    return Value::dict(std::move(d));
  }

  Value make_macro(const Stmt& s, const FramePtr& def_frame, const std::string& name) {
    const Stmt* m = &s;
    return Value::function(
        name, [this, m, def_frame](CallArgs& args) { return call_macro(*m, def_frame, args); });
  }

  Value call_macro(const Stmt& m, const FramePtr& def_frame, CallArgs& args) {
    FramePtr frame = child(def_frame);
    std::vector<bool> used(args.keyword.size(), false);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const std::string& p = m.params[i];
      Value v;
      bool found = i < args.positional.size();
      if (found) v = args.positional[i];
      for (size_t k = 0; k < args.keyword.size() && !found; ++k) {
        if (args.keyword[k].first == p) v = args.keyword[k].second, used[k] = found = true;
      }
      if (!found)
        v = m.defaults[i] ? eval(*m.defaults[i], frame)
                          : Value::undefined("parameter '" + p + "' was not provided");
      frame->vars[p] = std::move(v);
    }
    bool is_macro = m.kind == StmtKind::Macro;
    if (is_macro && !m.uses_varargs && args.positional.size() > m.params.size())
      fail("macro '", m.name, "' takes not more than ", m.params.size(), " argument(s)");
    ValueList extra;
    for (size_t i = m.params.size(); i < args.positional.size(); ++i)
      extra.push_back(args.positional[i]);
    frame->vars["varargs"] = Value::list(std::move(extra), SeqKind::Tuple);
    auto kwargs = std::make_shared<Dict>();
    for (size_t k = 0; k < args.keyword.size(); ++k) {
      if (used[k]) continue;
      if (args.keyword[k].first == "caller") {
        frame->vars["caller"] = args.keyword[k].second;
      } else if (is_macro && !m.uses_kwargs) {
        fail("macro '", m.name, "' takes no keyword argument '", args.keyword[k].first, "'");
      } else {
        kwargs->items.emplace_back(Value::string(args.keyword[k].first), args.keyword[k].second);
      }
    }
    frame->vars["kwargs"] = Value::dict(std::move(kwargs));
    std::string out;
    exec(m.body, frame, out);
    return Value::string(std::move(out));
  }
};

Value make_namespace(CallArgs& args) {
  auto d = std::make_shared<Dict>();
  d->is_namespace = true;
  for (const Value& p : args.positional) {
    if (!p.is_dict()) fail("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : p.dict_ref().items) d->set(k, v);
  }
  for (const auto& [k, v] : args.keyword) d->set(Value::string(k), v);
  return Value::dict(std::move(d));
}

Value make_range(CallArgs& args) {
  for (const Value& a : args.positional) {
    if (!a.is_int() && !a.is_bool())
      fail("'", a.type_name(), "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop = 0, step = 1;
  size_t n = args.positional.size();
  if (n == 1) stop = args.positional[0].as_int();
  if (n >= 2) start = args.positional[0].as_int(), stop = args.positional[1].as_int();
  if (n >= 3) step = args.positional[2].as_int();
  if (n == 0 || n > 3) fail("range expected at most 3 arguments, got ", n);
  if (step == 0) fail("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

}  // namespace

void add_builtin_globals(Frame& globals) {
  globals.vars["range"] = Value::function("range", make_range);
  globals.vars["namespace"] = Value::function("namespace", make_namespace);
  globals.vars["dict"] = Value::function("dict", [](CallArgs& args) {
    Value d = make_namespace(args);
    d.mutable_dict().is_namespace = false;
    return d;
  });
}

std::string render_template(const StmtList& body, const FramePtr& globals) {
  Interpreter interpreter;
  std::string out;
  interpreter.exec(body, child(globals), out);
  return out;
}

}  // namespace sluice::jinja
