// The syntax tree the parser builds and the interpreter walks: expressions (Expr) and
// statements (Stmt). Plain structs with one generic shape per family keep the tree small; the
// comment on each kind says which fields it uses. Owns no behaviour.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace sluice::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  Const,     // constant
  Name,      // name
  List,      // items
  Tuple,     // items
  Dict,      // items: key, value, key, value, …
  Getattr,   // a . name
  Getitem,   // a [ b ]
  Slice,     // a : b : c (each may be null); only inside Getitem
  Call,      // a ( args, kwargs, dyn_args, dyn_kwargs )
  Filter,    // a | name(args…); a is null in a filter block
  Test,      // a is [not] name(args…)
  Not,       // not a
  Neg,       // -a
  Pos,       // +a
  Binary,    // a op b with op in + - * / // % ** ~
  Compare,   // items[0] ops[0] items[1] ops[1] items[2] … (chained like Python)
  And,       // a and b
  Or,        // a or b
  CondExpr,  // b if a else c (c may be null)
};

struct Expr {
  ExprKind kind = ExprKind::Const;
  int line = 1;
  std::string name;
  Value constant;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args, dyn_kwargs;
  bool negated = false;       // Test: `is not`
  bool soft_unknown = false;  // Filter/Test: unknown name, to be reported only if evaluated
};

enum class StmtKind : uint8_t {
  Data,         // text
  Output,       // expr
  If,           // expr, body, else_body (an elif is an If alone in else_body)
  For,          // target, expr (iterable), filter, body, else_body, recursive
  Set,          // target (Name, Tuple of Names, or Getattr on a namespace), expr
  SetBlock,     // target, body, expr = filter chain (null when none)
  Macro,        // name, params, defaults, body
  CallBlock,    // expr (the call), params/defaults (caller's), body
  FilterBlock,  // expr (filter chain whose innermost target is null), body
  With,         // targets + values in params/defaults order, body
  Break,
  Continue,
  Scope,  // body rendered as is (the `generation` tag of transformers)
};

struct Stmt {
  StmtKind kind = StmtKind::Data;
  int line = 1;
  std::string text;
  std::string name;
  ExprPtr expr, target, filter;
  StmtList body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params; null where no default
  std::vector<ExprPtr> targets;   // With
  bool recursive = false;
  bool uses_varargs = false;  // Macro: the body reads `varargs` (else extra positionals fail)
  bool uses_kwargs = false;   // Macro: the body reads `kwargs` (else unknown keywords fail)
};

}  // namespace sluice::jinja
