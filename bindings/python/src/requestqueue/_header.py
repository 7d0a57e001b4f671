"""Turns the real C header, include/requestqueue.h, into a cffi ``cdef``.

cffi's parser understands declarations but not the preprocessor, so this module runs a small one:
comments are stripped, ``#include`` lines dropped, ``#if``/``#ifdef``/``#ifndef``/``#elif``/
``#else``/``#endif`` evaluated (as a compiler that is neither GCC nor Clang nor C++ would, so that
``RQ_API`` and ``RQ_DEPRECATED(msg)`` expand to nothing and the ``extern "C"`` guard disappears), and
macros expanded. Every declaration of the header is kept as it is written, so the binding can never
drift from the header. Object-like macros whose value is a constant expression are evaluated: the
integer ones go into the cdef as ``#define NAME value`` (cffi exposes them on the library object) and
all of them, strings and floats included, are returned in :attr:`Header.defines`.

It needs nothing but the standard library. It makes ``_ffi`` (``bindings/python/gen_ffi.py``), and
runs at import time only on a header whose declarations are not ``_ffi``'s (see ``_native``).
Parsing include/requestqueue.h takes about 13 ms (Python 3.11), cffi's ``cdef`` of the result about
0.1 s more with its imports.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

__all__ = ["Header", "HeaderError", "parse_header"]

Value = Union[int, float, str]


class HeaderError(ValueError):
    """The header could not be preprocessed (an unbalanced #if, an #error, a bad expression)."""


@dataclass
class Header:
    """The result of :func:`parse_header`."""

    #: The declarations, ready for ``FFI.cdef``.
    cdef: str
    #: Object-like macros with a constant value: ints, floats and strings.
    defines: Dict[str, Value] = field(default_factory=dict)
    #: The names of every function declared, in header order.
    functions: List[str] = field(default_factory=list)


_TOKEN = re.compile(
    r'"(?:\\.|[^"\\\n])*"'  # string literal: kept
    r"|'(?:\\.|[^'\\\n])*'"  # character literal: kept
    r"|/\*.*?\*/"  # block comment: removed
    r"|//[^\n]*",  # line comment: removed
    re.DOTALL,
)
_DIRECTIVE = re.compile(r"^\s*#\s*(\w*)\s*(.*)$")
_DEFINE = re.compile(r"^(\w+)(\(([^)]*)\))?\s*(.*)$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_FUNCTION = re.compile(r"([A-Za-z_]\w*)\s*\(")


def _strip_comments(text: str) -> str:
    def replace(match: "re.Match[str]") -> str:
        token = match.group(0)
        if token.startswith("/*"):
            return " " + "\n" * token.count("\n")  # keep line numbers for error messages
        if token.startswith("//"):
            return " "
        return token

    return _TOKEN.sub(replace, text)


@dataclass
class _Macro:
    params: Optional[List[str]]  # None for an object-like macro
    body: str


_BINARY: Dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.BitXor: operator.xor,
}
_COMPARE: Dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _evaluate(node: ast.AST) -> object:
    """Evaluates a constant C expression already translated to Python syntax."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand)
        if isinstance(node.op, ast.USub):
            return -value  # type: ignore[operator]
        if isinstance(node.op, ast.UAdd):
            return +value  # type: ignore[operator]
        if isinstance(node.op, ast.Not):
            return int(not value)
        if isinstance(node.op, ast.Invert):
            return ~value  # type: ignore[operator]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Div) and isinstance(left, int) and isinstance(right, int):
            return int(left / right)  # C integer division truncates toward zero
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _evaluate(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body) if _evaluate(node.test) else _evaluate(node.orelse)
    raise HeaderError(f"not a constant expression: {ast.dump(node)}")


_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_FLOAT_SUFFIX = re.compile(r"\b(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[fFlL]\b")
_OCTAL = re.compile(r"\b0([0-7]+)\b")


def _c_to_python(expr: str) -> str:
    expr = _INT_SUFFIX.sub(r"\1", expr)
    expr = _FLOAT_SUFFIX.sub(r"\1", expr)
    expr = _OCTAL.sub(r"0o\1", expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    expr = re.sub(r"(?<![<>=!])/(?!/)", "//", expr)  # C integer division; floats are fixed below
    # ?: -> Python conditional expression, for the simple non-nested case.
    ternary = re.fullmatch(r"\s*(.+?)\s*\?\s*(.+?)\s*:\s*(.+?)\s*", expr)
    if ternary:
        expr = f"({ternary.group(2)}) if ({ternary.group(1)}) else ({ternary.group(3)})"
    return expr


class _Preprocessor:
    def __init__(self, predefined: Optional[Dict[str, str]] = None) -> None:
        self.macros: Dict[str, _Macro] = {}
        for name, body in (predefined or {}).items():
            self.macros[name] = _Macro(None, body)

    # -- macro expansion ---------------------------------------------------------------------------

    def expand(self, text: str, hide: Tuple[str, ...] = ()) -> str:
        """Expands every macro in `text` (a macro is not expanded inside its own expansion)."""
        out: List[str] = []
        pos = 0
        while True:
            match = _IDENT.search(text, pos)
            if match is None:
                out.append(text[pos:])
                return "".join(out)
            name = match.group(0)
            out.append(text[pos : match.start()])
            pos = match.end()
            # Skip identifiers inside string literals.
            if text.count('"', 0, match.start()) % 2 == 1:
                out.append(name)
                continue
            macro = self.macros.get(name)
            if macro is None or name in hide:
                out.append(name)
                continue
            if macro.params is None:
                out.append(" " + self.expand(macro.body, hide + (name,)) + " ")
                continue
            args, end = self._call_arguments(text, pos)
            if args is None:  # a function-like macro name not followed by "(" is not a call
                out.append(name)
                continue
            pos = end
            if len(macro.params) != len(args) and not (macro.params == [] and args == [""]):
                raise HeaderError(f"macro {name} takes {len(macro.params)} arguments, got {len(args)}")
            body = macro.body
            if macro.params:
                mapping = {p: self.expand(a, hide) for p, a in zip(macro.params, args)}
                body = _IDENT.sub(lambda m: mapping.get(m.group(0), m.group(0)), body)
            out.append(" " + self.expand(body, hide + (name,)) + " ")

    @staticmethod
    def _call_arguments(text: str, pos: int) -> Tuple[Optional[List[str]], int]:
        i = pos
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != "(":
            return None, pos
        depth, args, current, i = 0, [], [], i + 1
        in_string = False
        while i < len(text):
            ch = text[i]
            if in_string:
                current.append(ch)
                if ch == "\\" and i + 1 < len(text):
                    current.append(text[i + 1])
                    i += 1
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
                current.append(ch)
            elif ch == "(":
                depth += 1
                current.append(ch)
            elif ch == ")":
                if depth == 0:
                    args.append("".join(current).strip())
                    return args, i + 1
                depth -= 1
                current.append(ch)
            elif ch == "," and depth == 0:
                args.append("".join(current).strip())
                current = []
            else:
                current.append(ch)
            i += 1
        raise HeaderError("unterminated macro call")

    # -- constant expressions ----------------------------------------------------------------------

    def evaluate(self, expr: str, conditional: bool) -> Value:
        if conditional:
            expr = re.sub(
                r"\bdefined\s*(?:\(\s*(\w+)\s*\)|(\w+))",
                lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0",
                expr,
            )
        expanded = self.expand(expr).strip()
        if conditional:  # identifiers left after expansion are 0 in #if
            expanded = _IDENT.sub(lambda m: m.group(0) if m.group(0) in ("and", "or", "not") else "0",
                                  _c_to_python(expanded))
        else:
            expanded = _c_to_python(expanded)
        if not expanded:
            raise HeaderError("empty expression")
        try:
            tree = ast.parse(expanded, mode="eval")
        except SyntaxError as exc:
            raise HeaderError(f"cannot evaluate {expr!r}: {exc}") from None
        if not conditional and any(isinstance(n, ast.Name) for n in ast.walk(tree)):
            raise HeaderError(f"not a constant: {expr!r}")
        # Restore true division where an operand is a float literal ("1.0 / 2" in C is 0.5).
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
                if any(isinstance(n, ast.Constant) and isinstance(n.value, float) for n in ast.walk(node)):
                    node.op = ast.Div()
        value = _evaluate(tree)
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float, str)):
            raise HeaderError(f"not a constant: {expr!r}")
        return value

    # -- the file ----------------------------------------------------------------------------------

    def run(self, text: str) -> str:
        text = _strip_comments(text).replace("\\\n", " ")
        lines = text.split("\n")
        body: List[str] = []
        # Each frame: (this branch is active, some branch of this #if was already taken, parent active)
        stack: List[Tuple[bool, bool, bool]] = []
        active = True
        for number, line in enumerate(lines, 1):
            match = _DIRECTIVE.match(line)
            if match is None:
                if active:
                    body.append(line)
                continue
            directive, rest = match.group(1), match.group(2).strip()
            try:
                if directive in ("if", "ifdef", "ifndef"):
                    if not active:
                        stack.append((False, True, False))
                    else:
                        if directive == "ifdef":
                            cond = rest.split()[0] in self.macros
                        elif directive == "ifndef":
                            cond = rest.split()[0] not in self.macros
                        else:
                            cond = bool(self.evaluate(rest, conditional=True))
                        stack.append((cond, cond, True))
                    active = stack[-1][0]
                elif directive == "elif":
                    if not stack:
                        raise HeaderError("#elif without #if")
                    _, taken, parent = stack[-1]
                    cond = parent and not taken and bool(self.evaluate(rest, conditional=True))
                    stack[-1] = (cond, taken or cond, parent)
                    active = cond
                elif directive == "else":
                    if not stack:
                        raise HeaderError("#else without #if")
                    _, taken, parent = stack[-1]
                    stack[-1] = (parent and not taken, True, parent)
                    active = stack[-1][0]
                elif directive == "endif":
                    if not stack:
                        raise HeaderError("#endif without #if")
                    stack.pop()
                    active = stack[-1][0] if stack else True
                elif not active:
                    continue
                elif directive == "define":
                    define = _DEFINE.match(rest)
                    if define is None:
                        raise HeaderError(f"bad #define: {rest!r}")
                    params = None
                    if define.group(2) is not None:
                        params = [p.strip() for p in define.group(3).split(",") if p.strip()]
                    self.macros[define.group(1)] = _Macro(params, define.group(4).strip())
                elif directive == "undef":
                    self.macros.pop(rest.split()[0], None)
                elif directive == "error":
                    raise HeaderError(f"#error {rest}")
                elif directive in ("include", "pragma", "warning", "line", "ident", ""):
                    continue
                else:
                    raise HeaderError(f"unknown directive #{directive}")
            except HeaderError as exc:
                raise HeaderError(f"line {number}: {exc}") from None
        if stack:
            raise HeaderError("unterminated #if")
        return self.expand("\n".join(body))


def _function_names(declarations: str) -> List[str]:
    names: List[str] = []
    depth = 0
    statement: List[str] = []
    for ch in declarations:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth == 0:
            text = " ".join("".join(statement).split())
            statement = []
            if not text or text.startswith("typedef") or "{" in text:
                continue
            match = _FUNCTION.search(text)
            # "T name(args)" declares a function; "T (*name)(args)" would be a function pointer.
            if match and not text[: match.start()].rstrip().endswith("(*"):
                names.append(match.group(1))
        else:
            statement.append(ch)
    return names


def parse_header(text: str, predefined: Optional[Dict[str, str]] = None) -> Header:
    """Preprocesses a C header and returns its declarations as a cffi cdef.

    `predefined` macros are defined before the header is read (nothing by default: the header is
    read as by a plain C compiler, without ``__GNUC__`` or ``__cplusplus``).
    """
    pre = _Preprocessor(predefined)
    predefined_names = set((predefined or {}).keys())
    declarations = pre.run(text)
    # Drop blank lines so the cdef stays readable.
    declarations = "\n".join(line.rstrip() for line in declarations.split("\n") if line.strip())
    defines: Dict[str, Value] = {}
    for name, macro in pre.macros.items():
        if macro.params is not None or not macro.body or name in predefined_names:
            continue
        try:
            defines[name] = pre.evaluate(macro.body, conditional=False)
        except (HeaderError, ArithmeticError, TypeError):
            continue  # not a constant (an attribute, a type, ...): nothing to export
    integer_defines = [f"#define {name} {value}" for name, value in defines.items()
                       if isinstance(value, int) and not isinstance(value, bool)]
    cdef = "\n".join(integer_defines + [declarations]) + "\n"
    return Header(cdef=cdef, defines=defines, functions=_function_names(declarations))
