"""RocketMQ 4.9.8's SQL92 message filter (Java ``org.apache.rocketmq.filter``), sans-IO.

``compile_sql92(text)`` parses a consumer's ``MessageSelector.bySql`` expression once into an
``Expression``; ``Expression.evaluate(properties)`` tells whether a message's user properties match.
The grammar is ``filter/.../parser/SelectorParser.jj`` and the evaluation follows the expression
classes of 4.9.8 exactly, including their quirks:

* Grammar (``SelectorParser.jj``): ``OR`` < ``AND`` < ``=``, ``<>``, ``IS [NOT] NULL`` <
  ``>``, ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN x AND y``, ``[NOT] IN ('s', ...)`` < the prefix
  operators ``NOT``, ``-``, ``+`` (a no-op). ``NOT`` binds tighter than comparisons:
  ``NOT a = 1`` is ``(NOT a) = 1``. Keywords are case-insensitive; identifiers are
  ``[A-Za-z_$][A-Za-z0-9_$]*``; literals are ``'strings'`` (``''`` escapes a quote), decimal
  integers (``0`` or ``[1-9][0-9]*`` with an optional ``L``; no hex, no octal), floats (``1.5``,
  ``1.``, ``.5``, ``1e5``), ``TRUE``, ``FALSE`` and ``NULL``. ``--`` comments need a line end,
  ``/* */`` comments are skipped. There is no ``LIKE``, no arithmetic, no ``IS TRUE``.
* Like Java's generated parser (``JmsSelector`` never asks for ``<EOF>``), parsing stops at the
  first token that cannot continue the expression and ignores the rest, so ``a = 1 b`` compiles
  as ``a = 1`` and ``a = 0x10`` as ``a = 0``. Only the token after the expression (two after a
  trailing ``IS``/``NOT``) is looked at. ``compile_sql92(text, strict=True)`` rejects that rest.
* Compile-time checks (``ComparisonExpression``, ``ConstantExpression``, ``SelectorParser``):
  ``>``/``>=``/``<``/``<=``/``BETWEEN`` reject boolean sub-expressions and string, boolean or
  ``NULL`` literals; ``=``/``<>`` reject a ``NULL`` literal and ``TRUE``/``FALSE`` compared with
  a string or number literal; ``BETWEEN`` of two literals needs low <= high; ``IN`` needs a bare
  property on its left; ``AND``, ``OR``, ``NOT`` and the whole expression need a boolean or a
  property operand (``a`` alone is a boolean cast); integers must fit a Java long; float
  literals must lie in [Double.MIN_VALUE, Double.MAX_VALUE], so ``0.0`` is rejected.
* Evaluation (``ComparisonExpression``, ``LogicExpression``, ``UnaryExpression``): a missing
  property is ``NULL``; ``AND``/``OR``/``NOT`` use three-valued logic; only ``TRUE`` matches.
  Property values are Java ``String``s: compared with an integer literal they are parsed with
  ``Integer.valueOf`` (``Long.valueOf`` for a literal beyond int), with a float literal with
  ``Double.valueOf``, with ``TRUE``/``FALSE`` with ``Boolean.valueOf``; two properties compared
  with ``>`` etc. are both parsed as doubles. A value that does not parse makes Java's evaluation
  throw, and the broker (``ExpressionMessageFilter``) treats a throw as "no match" for the whole
  expression: ``a > 1 OR b = 'x'`` does not match ``{a: 'x', b: 'x'}``. ``x = y`` with both
  ``NULL`` is ``TRUE``; ``x = y`` is ``NULL`` when only ``x`` is ``NULL`` but ``FALSE`` when only
  ``y`` is. Doubles order as ``Double.compareTo`` (``NaN`` is the largest, ``-0.0 < 0.0``).

Beyond Java, input longer than ``MAX_EXPRESSION_LENGTH`` characters, parentheses or prefix
operators nested deeper than ``MAX_DEPTH`` and compiled trees taller than ``2 * MAX_DEPTH`` raise
``SQLSyntaxError`` (Java would eventually overflow its stack), so parsing and evaluation never
recurse without bound. Lexing and parsing are linear in the input's length.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "Expression", "SQLSyntaxError", "compile_sql92"]

MAX_DEPTH: Final = 100
"""Deepest nesting of parentheses and prefix operators (``NOT``, ``-``, ``+``) that compiles."""

MAX_EXPRESSION_LENGTH: Final = 65536
"""Longest expression, in characters, that ``compile_sql92`` accepts."""

_MAX_HEIGHT: Final = 2 * MAX_DEPTH  # height of the compiled tree, which bounds evaluation's recursion

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1
_DOUBLE_MIN: Final = 5e-324  # Java Double.MIN_VALUE, the smallest positive double ("4.9E-324")
_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


class SQLSyntaxError(ValueError):
    """An SQL92 filter expression that RocketMQ 4.9.8 refuses to compile.

    ``position`` is the 0-based character offset in ``expression`` where the problem was found
    (``len(expression)`` for an unexpected end); the message names it as ``line L, column C``,
    the way Java's ``ParseException`` and ``TokenMgrError`` do.
    """

    expression: str
    position: int

    def __init__(self, message: str, expression: str, position: int) -> None:
        super().__init__(message)
        self.expression = expression
        self.position = position

    def __reduce__(self) -> tuple[type[SQLSyntaxError], tuple[str, str, int]]:
        return (type(self), (str(self), self.expression, self.position))


# --- Java value semantics --------------------------------------------------------------------
#
# Values flowing through an evaluation are None (Java null), str (String), bool (Boolean),
# int (Integer), _Long (Long) and float (Double). The Integer/Long split matters: a String
# compared with an Integer is parsed with Integer.valueOf, which rejects "5000000000".


class _Long(int):
    """A Java ``Long`` (an integer literal beyond the int range, or its negation)."""

    __slots__ = ()


class _EvalError(Exception):
    """Java's evaluation threw (NumberFormatException, ClassCastException): the message is no match."""


_ASCII_INT: Final = re.compile(r"[+-]?[0-9]{1,18}")
_JAVA_TRIM: Final = "".join(map(chr, range(0x21)))  # String.trim() strips every char <= ' '
_DOUBLE_DEC: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_DOUBLE_HEX: Final = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]*\.?[0-9a-fA-F]*)[pP]([+-]?[0-9]+)[fFdD]?")


def _parse_java_integer(s: str, low: int, high: int) -> int:
    """``Integer.parseInt``/``Long.parseLong``: sign, then Unicode decimal digits (UTF-16 BMP)."""
    if _ASCII_INT.fullmatch(s) is not None:
        value = int(s)
    else:
        digits = s[1:] if s[:1] in ("+", "-") else s
        if not digits:
            raise _EvalError("NumberFormatException")
        value = 0
        for ch in digits:
            # Character.digit(ch, 10); a supplementary digit is two chars in Java, neither a digit
            digit = unicodedata.decimal(ch, -1) if ord(ch) <= 0xFFFF else -1
            if digit < 0:
                raise _EvalError("NumberFormatException")
            value = value * 10 + digit
            if value > 2**63:  # overflows either type; stop early to stay linear
                raise _EvalError("NumberFormatException")
        if s[0] == "-":
            value = -value
    if low <= value <= high:
        return value
    raise _EvalError("NumberFormatException")


def _parse_int(s: str) -> int:
    """``Integer.valueOf(String)``."""
    return _parse_java_integer(s, _INT_MIN, _INT_MAX)


def _parse_long(s: str) -> int:
    """``Long.valueOf(String)``."""
    return _parse_java_integer(s, _LONG_MIN, _LONG_MAX)


def _parse_double(s: str) -> float:
    """``Double.valueOf(String)``: trimmed decimal or hex-float text, ``NaN``, ``Infinity``."""
    t = s.strip(_JAVA_TRIM)
    if _DOUBLE_DEC.fullmatch(t) is not None:
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t)
    m = _DOUBLE_HEX.fullmatch(t)
    if m is None or m[2].strip(".") == "":
        raise _EvalError("NumberFormatException")
    sign, mantissa, exponent = m.groups()
    try:
        return float.fromhex(f"{sign}0x{mantissa}p{exponent}")
    except OverflowError:
        return -math.inf if sign == "-" else math.inf


def _java_boolean(s: str) -> bool:
    """``Boolean.valueOf(String)``: ``"true".equalsIgnoreCase(s)``."""
    return s == "true" or s.lower() == "true"


def _cmp_double(a: float, b: float) -> int:
    """``Double.compare``: a total order with ``-0.0 < 0.0`` and ``NaN`` above everything."""
    if a < b:
        return -1
    if a > b:
        return 1
    if math.isnan(a):
        return 0 if math.isnan(b) else 1
    if math.isnan(b):
        return -1
    sa = math.copysign(1.0, a)
    sb = math.copysign(1.0, b)
    return 0 if sa == sb else (-1 if sa < sb else 1)


def _jcompare(lv: Any, rv: Any) -> int:
    """Java ``ComparisonExpression.__compare`` with ``convertStringExpressions`` on (as the parser sets).

    Converts one side to the other's type, then ``compareTo``; unrelated types compare as -1.
    """
    lc = type(lv)
    rc = type(rv)
    if lc is not rc:
        if lc is str:
            if rc is bool:
                lv = _java_boolean(lv)
            elif rc is int:
                lv = _parse_int(lv)
            elif rc is _Long:
                lv = _parse_long(lv)
            elif rc is float:
                return _cmp_double(_parse_double(lv), rv)
            else:
                return -1
        elif lc is float:
            if rc is str:
                rv = _parse_double(rv)
            elif rc is int or rc is _Long:
                rv = float(rv)
            else:
                return -1
            return _cmp_double(lv, rv)
        elif lc is int or lc is _Long:
            if rc is float:
                return _cmp_double(float(lv), rv)
            if rc is str:
                rv = _parse_int(rv) if lc is int else _parse_long(rv)
            elif rc is not int and rc is not _Long:
                return -1
        elif lc is bool:
            if rc is str:  # Java casts the Boolean to String: ClassCastException
                raise _EvalError("ClassCastException")
            return -1
        else:
            return -1
    elif lc is float:
        return _cmp_double(lv, rv)
    # same type now; str ordering differs from Java's UTF-16 order, but only == 0 is ever used
    return -1 if lv < rv else (1 if lv > rv else 0)


# --- compiled tree ---------------------------------------------------------------------------

_Props = Mapping[str, str]
_Fn = Callable[[_Props], Any]

# Java classes a node stands for; the compile-time checks depend on them.
_CONST: Final = "constant"  # ConstantExpression of a string or number
_BCONST: Final = "boolean constant"  # BooleanConstantExpression: TRUE, FALSE, NULL
_PROP: Final = "property"  # PropertyExpression
_BOOL: Final = "boolean"  # any other BooleanExpression (comparison, logic, NOT, IN, cast)
_VALUE: Final = "value"  # UnaryExpression negate: neither constant nor boolean

_NO_VALUE: Final = object()


class _Node:
    __slots__ = ("children", "end", "fixed", "fn", "height", "kind", "logic", "name", "start")

    def __init__(
        self,
        kind: str,
        fn: _Fn,
        start: int,
        end: int,
        height: int = 1,
        fixed: object = _NO_VALUE,
        name: str = "",
        logic: str = "",
        children: tuple[_Node, ...] = (),
    ) -> None:
        self.kind = kind
        self.fn = fn
        self.start = start
        self.end = end
        self.height = height
        self.fixed = fixed  # the value, when the node always evaluates to the same one
        self.name = name  # the property's name
        self.logic = logic  # "AND"/"OR" for a logic node (flattened)
        self.children = children


def _constant_fn(value: object) -> _Fn:
    return lambda _props: value


def _property_fn(name: str) -> _Fn:
    def prop(props: _Props) -> Any:
        v = props.get(name)
        if v is None or type(v) is str:
            return v
        return str(v)  # outside the contract: everything on the wire is a String

    return prop


def _logic_fn(op: str, fns: tuple[_Fn, ...]) -> _Fn:
    # n-ary form of LogicExpression's left-deep createOR/createAND chains: same order of
    # evaluation, same short circuit, NULL if any operand was NULL and none decided.
    if op == "OR":

        def or_(props: _Props) -> Any:
            unknown = False
            for fn in fns:
                v = fn(props)
                if v is True:
                    return True
                if v is None:
                    unknown = True
            return None if unknown else False

        return or_

    def and_(props: _Props) -> Any:
        unknown = False
        for fn in fns:
            v = fn(props)
            if v is False:
                return False
            if v is None:
                unknown = True
        return None if unknown else True

    return and_


def _not_fn(fn: _Fn) -> _Fn:
    def not_(props: _Props) -> Any:
        v = fn(props)
        return None if v is None else not v

    return not_


def _negate_fn(fn: _Fn) -> _Fn:
    def negate(props: _Props) -> Any:
        return _negate(fn(props))

    return negate


def _negate(v: Any) -> Any:
    """``UnaryExpression.negate``: numbers keep their Java type (with wrap-around); others are NULL."""
    t = type(v)
    if t is int:
        return -v - 2**32 if -v > _INT_MAX else -v
    if t is _Long:
        return _Long(-v - 2**64 if -v > _LONG_MAX else -v)
    if t is float:
        return -v
    return None


def _boolean_cast_fn(fn: _Fn) -> _Fn:
    def cast(props: _Props) -> Any:  # UnaryExpression.createBooleanCast
        v = fn(props)
        if v is None:
            return None
        return v if type(v) is bool else False

    return cast


def _equal_fn(lnode: _Node, rnode: _Node) -> _Fn:
    """``ComparisonExpression.doCreateEqual``, specialised for a property against a constant."""
    lf = lnode.fn
    rf = rnode.fn
    if lnode.kind == _PROP and rnode.fixed is not _NO_VALUE:
        name = lnode.name
        k = rnode.fixed
        if type(k) is str:

            def eq_prop_str(props: _Props) -> Any:
                v = props.get(name)
                if v is None:
                    return None
                return (v if type(v) is str else str(v)) == k

            return eq_prop_str
        if k is None:
            return lambda props: lf(props) is None  # both NULL: TRUE; only the property: FALSE

        def eq_prop_fixed(props: _Props) -> Any:
            v = lf(props)
            if v is None:
                return None
            return _jcompare(v, k) == 0

        return eq_prop_fixed

    def eq(props: _Props) -> Any:
        lv = lf(props)
        rv = rf(props)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return _jcompare(lv, rv) == 0

    return eq


_ACCEPT: Final = {
    ">": frozenset((1,)),
    ">=": frozenset((0, 1)),
    "<": frozenset((-1,)),
    "<=": frozenset((-1, 0)),
}


def _ordered_fn(op: str, lnode: _Node, rnode: _Node) -> _Fn:
    """``ComparisonExpression.evaluate`` for ``>``, ``>=``, ``<``, ``<=``."""
    accept = _ACCEPT[op]
    lf = lnode.fn
    rf = rnode.fn
    if lnode.kind == _PROP and type(rnode.fixed) in (int, _Long, float):
        name = lnode.name
        k: Any = rnode.fixed
        if type(k) is float:

            def gt_prop_double(props: _Props) -> Any:
                v = props.get(name)
                if v is None:
                    return None
                return _cmp_double(_parse_double(v if type(v) is str else str(v)), k) in accept

            return gt_prop_double
        parse = _parse_int if type(k) is int else _parse_long

        def gt_prop_integer(props: _Props) -> Any:
            v = props.get(name)
            if v is None:
                return None
            n = parse(v if type(v) is str else str(v))
            return (-1 if n < k else (1 if n > k else 0)) in accept

        return gt_prop_integer

    def ordered(props: _Props) -> Any:
        lv = lf(props)
        if lv is None:
            return None
        rv = rf(props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # both parsed as doubles, or it throws
            return _cmp_double(_parse_double(lv), _parse_double(rv)) in accept
        return _jcompare(lv, rv) in accept

    return ordered


def _in_fn(name: str, values: frozenset[str], negated: bool) -> _Fn:
    def in_(props: _Props) -> Any:  # UnaryExpression.createInExpression
        v = props.get(name)
        if v is None:
            return None
        if type(v) is not str:
            v = str(v)
        return (v in values) is not negated

    return in_


# --- lexer -----------------------------------------------------------------------------------


class _Token(NamedTuple):
    kind: str  # a keyword, an operator, "ID", "STRING", "INT", "FLOAT" or "EOF"
    text: str
    start: int
    value: str = ""  # a string literal's decoded value


_KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
_ID_RE: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL_RE: Final = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT_RE: Final = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
)
_WHITESPACE: Final = frozenset(" \t\n\r\f")
_LINE_BREAK_RE: Final = re.compile(r"\r\n?|\n")


class _Lexer:
    """``SelectorParserTokenManager``: JavaCC's longest match, tokens produced on demand."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._next_break = -2  # cached index of the next line break (-1: none left, -2: unknown)

    def _line_break_at_or_after(self, i: int) -> int:
        if self._next_break == -2 or (self._next_break != -1 and self._next_break < i):
            m = _LINE_BREAK_RE.search(self._text, i)
            self._next_break = -1 if m is None else m.start()
        return self._next_break

    def next(self) -> _Token:
        text = self._text
        n = len(text)
        i = self._pos
        while i < n:  # white space and comments
            c = text[i]
            if c in _WHITESPACE:
                i += 1
            elif c == "-" and text.startswith("--", i):
                # LINE_COMMENT needs its line break; without one "--" lexes as two minus signs
                j = self._line_break_at_or_after(i)
                if j < 0:
                    break
                i = j + (2 if text.startswith("\r\n", j) else 1)
            elif c == "/" and text.startswith("/*", i):
                j = text.find("*/", i + 2)
                if j < 0:
                    raise _lexical_error(text, i, f'<EOF> in a comment: "{_shorten(text[i:])}"')
                i = j + 2
            else:
                break
        if i >= n:
            self._pos = n
            return _Token("EOF", "", n)
        c = text[i]
        if c == "'":
            end, value = _scan_string(text, i)
            self._pos = end
            return _Token("STRING", text[i:end], i, value)
        if c in "0123456789.":
            dm = _DECIMAL_RE.match(text, i)
            fm = _FLOAT_RE.match(text, i)
            dend = dm.end() if dm is not None else i
            fend = fm.end() if fm is not None else i
            if fend > dend:
                self._pos = fend
                return _Token("FLOAT", text[i:fend], i)
            if dend > i:
                self._pos = dend
                return _Token("INT", text[i:dend], i)
            raise _lexical_error(text, i, _describe_char(c))
        m = _ID_RE.match(text, i)
        if m is not None:
            word = m[0]
            self._pos = m.end()
            upper = word.upper()
            return _Token(upper if upper in _KEYWORDS else "ID", word, i)
        if c in "<>":
            two = text[i : i + 2]
            if two in ("<>", "<=", ">="):
                self._pos = i + 2
                return _Token(two, two, i)
        if c in "=<>(),+-":
            self._pos = i + 1
            return _Token(c, c, i)
        raise _lexical_error(text, i, _describe_char(c))


def _scan_string(text: str, start: int) -> tuple[int, str]:
    """STRING_LITERAL ``"'" ( "''" | ~["'"] )* "'"`` by longest match; returns (end, decoded value).

    A run of k quotes inside the literal closes it when k is odd; when k is even it can close
    before its last quote, which is where the literal ends if nothing later closes it.
    """
    n = len(text)
    i = start + 1
    fallback = -1
    while True:
        q = text.find("'", i)
        if q < 0:
            if fallback < 0:
                raise _lexical_error(text, start, f'<EOF> in a string literal: "{_shorten(text[start:])}"')
            end = fallback
            break
        run_end = q
        while run_end < n and text[run_end] == "'":
            run_end += 1
        if (run_end - q) % 2 == 1:
            end = run_end
            break
        fallback = run_end - 1
        i = run_end
    return end, text[start + 1 : end - 1].replace("''", "'")


def _describe_char(c: str) -> str:
    return (f'"{c}"' if c.isprintable() else repr(c)) + f" ({ord(c)})"


# --- errors ----------------------------------------------------------------------------------


def _line_column(text: str, position: int) -> tuple[int, int]:
    """JavaCC's 1-based line and column (lines end at \\n, \\r or \\r\\n)."""
    line = 1
    line_start = 0
    for m in _LINE_BREAK_RE.finditer(text, 0, position):
        line += 1
        line_start = m.end()
    return line, position - line_start + 1


def _where(text: str, position: int) -> str:
    line, column = _line_column(text, position)
    return f"line {line}, column {column}"


def _lexical_error(text: str, position: int, what: str) -> SQLSyntaxError:
    return SQLSyntaxError(f"Lexical error at {_where(text, position)}. Encountered: {what}", text, position)


def _shorten(s: str, limit: int = 40) -> str:
    return s if len(s) <= limit else s[: limit - 3] + "..."


_STARTS_OPERAND: Final = (
    '"NOT"',
    '"TRUE"',
    '"FALSE"',
    '"NULL"',
    "<DECIMAL_LITERAL>",
    "<FLOATING_POINT_LITERAL>",
    "<STRING_LITERAL>",
    "<ID>",
    '"("',
    '"+"',
    '"-"',
)
_CONTINUES: Final = (
    '"NOT"',
    '"AND"',
    '"OR"',
    '"BETWEEN"',
    '"IN"',
    '"IS"',
    '"="',
    '"<>"',
    '">"',
    '">="',
    '"<"',
    '"<="',
)


# --- parser ----------------------------------------------------------------------------------

_PREC_OR: Final = 1
_PREC_AND: Final = 2
_PREC_EQUALITY: Final = 3  # =, <>, IS [NOT] NULL
_PREC_COMPARISON: Final = 4  # >, >=, <, <=, [NOT] BETWEEN, [NOT] IN (right operands are unary)
_PRECEDENCE: Final = {
    "OR": _PREC_OR,
    "AND": _PREC_AND,
    "=": _PREC_EQUALITY,
    "<>": _PREC_EQUALITY,
    "IS": _PREC_EQUALITY,
    ">": _PREC_COMPARISON,
    ">=": _PREC_COMPARISON,
    "<": _PREC_COMPARISON,
    "<=": _PREC_COMPARISON,
    "BETWEEN": _PREC_COMPARISON,
    "IN": _PREC_COMPARISON,
    "NOT": _PREC_COMPARISON,
}


class _Parser:
    """``SelectorParser``: the same grammar by precedence climbing, same look-ahead, same checks."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._lexer = _Lexer(text)
        self._buffer: list[_Token] = []
        self._nesting = 0

    # tokens

    def _peek(self, k: int = 0) -> _Token:
        while len(self._buffer) <= k:
            self._buffer.append(self._lexer.next())
        return self._buffer[k]

    def _take(self) -> _Token:
        self._peek()
        return self._buffer.pop(0)

    def _expect(self, kind: str, expected: tuple[str, ...]) -> _Token:
        tok = self._peek()
        if tok.kind != kind:
            raise self._unexpected(tok, expected)
        return self._take()

    def _unexpected(self, tok: _Token, expected: tuple[str, ...]) -> SQLSyntaxError:
        found = "<EOF>" if tok.kind == "EOF" else _shorten(tok.text)
        wanted = ", ".join(expected)
        return SQLSyntaxError(
            f'Encountered "{found}" at {_where(self._text, tok.start)}. Was expecting one of: {wanted}',
            self._text,
            tok.start,
        )

    def _semantic(self, message: str, position: int) -> SQLSyntaxError:
        return SQLSyntaxError(f"{message} (at {_where(self._text, position)})", self._text, position)

    def _source(self, node: _Node) -> str:
        return _shorten(self._text[node.start : node.end])

    def _enter(self, tok: _Token) -> None:
        self._nesting += 1
        if self._nesting > MAX_DEPTH:
            raise self._semantic(f"Expression nests deeper than {MAX_DEPTH} levels", tok.start)

    # grammar

    def parse(self, strict: bool) -> _Node:
        node = self._expression(_PREC_OR)
        if strict and self._peek().kind != "EOF":
            raise self._unexpected(self._peek(), (*_CONTINUES, "<EOF>"))
        return self._as_boolean(node)

    def _expression(self, min_prec: int) -> _Node:
        """orExpression/andExpression/equalityExpression/comparisonExpression and their loops.

        Precedence climbing: an operator joins this loop when its level is at least ``min_prec``
        (lower levels belong to an enclosing loop) and at most the level of the operator applied
        last: once Java's equalityExpression loop has applied ``IS NULL`` it only goes on with
        equality operators, and a comparison operator then ends the whole expression.
        """
        left = self._unary()
        ceiling = _PREC_COMPARISON
        while True:
            tok = self._peek()
            kind = tok.kind
            prec = _PRECEDENCE.get(kind, 0)
            if not min_prec <= prec <= ceiling:
                return left
            ceiling = prec
            if kind in ("OR", "AND"):
                # one n-ary node for the whole chain (Java: a left-deep chain of binary nodes);
                # as in Java, an operand's boolean check comes after the next operand is parsed
                operands: list[_Node] = []
                while self._peek().kind == kind:
                    self._take()
                    right = self._expression(prec + 1)
                    if not operands:
                        operands.append(self._as_boolean(left))
                    operands.append(self._as_boolean(right))
                left = self._logic(kind, operands)
            elif kind in ("=", "<>"):
                self._take()
                right = self._expression(_PREC_COMPARISON)
                left = self._equal(left, right, tok)
                if kind == "<>":
                    left = self._not(left)
            elif kind == "IS":
                self._take()
                negated = self._peek().kind == "NOT"
                if negated:
                    self._take()
                    null = self._expect("NULL", ('"NULL"',))
                else:
                    null = self._expect("NULL", ('"NOT"', '"NULL"'))
                left = self._is_null(left, negated, null.start + len(null.text))
            elif kind == "BETWEEN":
                self._take()
                left = self._between(left, tok, negated=False)
            elif kind == "IN":
                self._take()
                left = self._in(left, tok, negated=False)
            elif kind == "NOT":  # after an operand only NOT BETWEEN or NOT IN can follow
                after = self._peek(1)
                if after.kind == "BETWEEN":
                    self._take()
                    self._take()
                    left = self._between(left, tok, negated=True)
                elif after.kind == "IN":
                    self._take()
                    self._take()
                    left = self._in(left, tok, negated=True)
                else:
                    raise self._unexpected(after, ('"BETWEEN"', '"IN"'))
            else:  # >, >=, <, <=: the right operand is a unaryExpr
                self._take()
                left = self._ordered(kind, left, self._unary())

    def _unary(self) -> _Node:
        """unaryExpr: prefix operators (iteratively, so long chains need no recursion), then primaryExpr."""
        prefixes: list[_Token] = []
        while self._peek().kind in ("NOT", "-", "+"):
            tok = self._take()
            self._enter(tok)
            prefixes.append(tok)
        tok = self._peek()
        if tok.kind == "(":  # primaryExpr's "(" orExpression ")", handled here to save a stack frame
            self._take()
            self._enter(tok)
            node = self._expression(_PREC_OR)  # Java returns the inner expression itself
            self._expect(")", (*_CONTINUES, '")"'))
            self._nesting -= 1
        else:
            node = self._primary()
        for tok in reversed(prefixes):
            if tok.kind == "-":
                node = self._negate(node, tok)
            elif tok.kind == "NOT":
                node = self._not(self._as_boolean(node), tok.start)
        self._nesting -= len(prefixes)
        return node

    def _primary(self) -> _Node:
        """primaryExpr without its parentheses: a literal or a property."""
        tok = self._peek()
        kind = tok.kind
        end = tok.start + len(tok.text)
        if kind == "ID":
            self._take()
            return _Node(_PROP, _property_fn(tok.text), tok.start, end, name=tok.text)
        if kind == "STRING":
            self._take()
            return _Node(_CONST, _constant_fn(tok.value), tok.start, end, fixed=tok.value)
        if kind == "INT":
            self._take()
            return self._decimal(tok)
        if kind == "FLOAT":
            self._take()
            return self._float(tok)
        if kind in ("TRUE", "FALSE", "NULL"):
            self._take()
            value = None if kind == "NULL" else kind == "TRUE"
            return _Node(_BCONST, _constant_fn(value), tok.start, end, fixed=value)
        raise self._unexpected(tok, _STARTS_OPERAND)

    def _string_list(self) -> tuple[frozenset[str], int]:
        """``"(" stringLitteral ("," stringLitteral)* ")"``; returns the values and the end offset."""
        self._expect("(", ('"("',))
        values = [self._expect("STRING", ("<STRING_LITERAL>",)).value]
        while self._peek().kind == ",":
            self._take()
            values.append(self._expect("STRING", ("<STRING_LITERAL>",)).value)
        close = self._expect(")", ('","', '")"'))
        return frozenset(values), close.start + 1

    # literals (ConstantExpression.createFromDecimal / createFloat)

    def _decimal(self, tok: _Token) -> _Node:
        digits = tok.text.rstrip("lL")
        value = int(digits) if len(digits) <= 19 else _LONG_MAX + 1
        if value > _LONG_MAX:
            raise self._semantic(f'For input string: "{_shorten(digits)}"', tok.start)
        fixed = value if value <= _INT_MAX else _Long(value)
        return _Node(_CONST, _constant_fn(fixed), tok.start, tok.start + len(tok.text), fixed=fixed)

    def _float(self, tok: _Token) -> _Node:
        value = float(tok.text)
        if value == math.inf:
            raise self._semantic(f"{_shorten(tok.text)} is greater than 1.7976931348623157E308", tok.start)
        if value < _DOUBLE_MIN:
            raise self._semantic(f"{_shorten(tok.text)} is less than 4.9E-324", tok.start)
        return _Node(_CONST, _constant_fn(value), tok.start, tok.start + len(tok.text), fixed=value)

    # node construction with Java's compile-time checks

    def _make(self, kind: str, fn: _Fn, start: int, end: int, *children: _Node, **extra: Any) -> _Node:
        height = 1 + max((c.height for c in children), default=0)
        if height > _MAX_HEIGHT:
            raise self._semantic(f"Expression tree is taller than {_MAX_HEIGHT} levels", start)
        return _Node(kind, fn, start, end, height, **extra)

    def _as_boolean(self, node: _Node) -> _Node:
        """SelectorParser.asBooleanExpression."""
        if node.kind in (_BOOL, _BCONST):
            return node
        if node.kind == _PROP:
            return self._make(_BOOL, _boolean_cast_fn(node.fn), node.start, node.end, node)
        raise self._semantic(
            f"Expression will not result in a boolean value: {self._source(node)}", node.start
        )

    def _logic(self, op: str, operands: list[_Node]) -> _Node:
        """LogicExpression.createOR/createAND over a chain; nested chains of one operator flatten."""
        children = tuple(
            grandchild
            for child in operands
            for grandchild in (child.children if child.logic == op else (child,))
        )
        fn = _logic_fn(op, tuple(c.fn for c in children))
        return self._make(
            _BOOL, fn, operands[0].start, operands[-1].end, *children, logic=op, children=children
        )

    def _not(self, node: _Node, start: int | None = None) -> _Node:
        """UnaryExpression.createNOT (its operand is already a boolean)."""
        return self._make(_BOOL, _not_fn(node.fn), node.start if start is None else start, node.end, node)

    def _negate(self, node: _Node, tok: _Token) -> _Node:
        """UnaryExpression.createNegate: not folded, so it is no ConstantExpression for the checks."""
        fixed = _negate(node.fixed) if node.fixed is not _NO_VALUE else _NO_VALUE
        fn = _constant_fn(fixed) if fixed is not _NO_VALUE else _negate_fn(node.fn)
        return self._make(_VALUE, fn, tok.start, node.end, node, fixed=fixed)

    def _check_equal_operand(self, node: _Node) -> None:
        """ComparisonExpression.checkEqualOperand: no NULL literal."""
        if node.kind in (_CONST, _BCONST) and node.fixed is None:
            raise self._semantic(f"'{self._source(node)}' cannot be compared.", node.start)

    def _equal(self, left: _Node, right: _Node, op: _Token) -> _Node:
        """ComparisonExpression.createEqual (createNotEqual wraps it in NOT)."""
        self._check_equal_operand(left)
        self._check_equal_operand(right)
        if left.kind == _BCONST and right.kind == _CONST:  # checkEqualOperandCompatability
            raise self._semantic(
                f"'{self._source(left)}' cannot be compared with '{self._source(right)}'", op.start
            )
        return self._make(_BOOL, _equal_fn(left, right), left.start, right.end, left, right)

    def _is_null(self, node: _Node, negated: bool, end: int) -> _Node:
        """ComparisonExpression.createIsNull/createIsNotNull: ``x = NULL`` without the checks."""
        fn = node.fn
        equal = self._make(_BOOL, lambda props: fn(props) is None, node.start, end, node)
        return self._not(equal) if negated else equal

    def _check_less_than_operand(self, node: _Node) -> None:
        """ComparisonExpression.checkLessThanOperand: numbers, properties and negations only."""
        if node.kind in (_CONST, _BCONST):
            if type(node.fixed) in (int, _Long, float):
                return
        elif node.kind != _BOOL:
            return
        raise self._semantic(f"Value '{self._source(node)}' cannot be compared.", node.start)

    def _ordered(self, op: str, left: _Node, right: _Node) -> _Node:
        """ComparisonExpression.createGreaterThan/...Equal/createLessThan/...Equal."""
        self._check_less_than_operand(left)
        self._check_less_than_operand(right)
        return self._make(_BOOL, _ordered_fn(op, left, right), left.start, right.end, left, right)

    def _between(self, value: _Node, tok: _Token, negated: bool) -> _Node:
        """ComparisonExpression.createBetween/createNotBetween."""
        low = self._unary()
        self._expect("AND", ('"AND"',))
        high = self._unary()
        if negated:
            return self._logic("OR", [self._ordered("<", value, low), self._ordered(">", value, high)])
        if low.kind in (_CONST, _BCONST) and high.kind in (_CONST, _BCONST):
            if low.fixed is None or high.fixed is None:
                raise self._semantic("Illegal values of between, values can not be null!", tok.start)
            try:
                ordered = _jcompare(high.fixed, low.fixed) >= 0
            except _EvalError:
                ordered = False
            if not ordered:
                raise self._semantic(
                    f"Illegal values of between, left value({self._source(low)}) must less than or "
                    f"equal to right value({self._source(high)})",
                    tok.start,
                )
        return self._logic("AND", [self._ordered(">=", value, low), self._ordered("<=", value, high)])

    def _in(self, left: _Node, tok: _Token, negated: bool) -> _Node:
        """ComparisonExpression.createInFilter/createNotInFilter."""
        values, end = self._string_list()
        if left.kind != _PROP:
            raise self._semantic(
                f"Expected a property for In expression, got: {self._source(left)}", tok.start
            )
        return self._make(_BOOL, _in_fn(left.name, values, negated), left.start, end, left)


# --- public API ------------------------------------------------------------------------------


class Expression:
    """A compiled SQL92 filter; reusable, immutable and safe to share between threads.

    Build it with ``compile_sql92``. Evaluating it runs a tree of small closures: no parsing.
    """

    __slots__ = ("_fn", "_source")

    def __init__(self, source: str, fn: _Fn) -> None:
        self._source = source
        self._fn = fn

    @property
    def expression(self) -> str:
        """The source text this expression was compiled from."""
        return self._source

    def evaluate(self, properties: Mapping[str, str] | None) -> bool:
        """Whether a message with these user properties matches: only a Java ``TRUE`` does.

        ``NULL`` (unknown) and ``FALSE`` do not match, and neither does an evaluation Java would
        abort with an exception (a property that does not parse as the literal it is compared
        with): Java's ``ExpressionMessageFilter`` logs it and skips the message. Never raises.
        ``None`` behaves as an empty mapping, as in Java's ``MessageEvaluationContext``.
        """
        try:
            return self._fn(_EMPTY if properties is None else properties) is True
        except Exception:  # _EvalError, or a misbehaving mapping; Java catches Throwable here
            return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._source!r})"


def compile_sql92(expression: str, *, strict: bool = False) -> Expression:
    """Compile a RocketMQ SQL92 filter expression, as Java's ``SelectorParser.parse`` does.

    Tokens after the longest valid expression are ignored, as in RocketMQ 4.9.8
    (``a = 1 b`` compiles as ``a = 1``); ``strict=True`` rejects them instead.

    Raises:
        SQLSyntaxError: the expression is empty, does not lex or parse, fails one of Java's
            compile-time checks, or exceeds ``MAX_EXPRESSION_LENGTH`` or ``MAX_DEPTH``.
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SQLSyntaxError(
            f"Expression is longer than {MAX_EXPRESSION_LENGTH} characters", expression, MAX_EXPRESSION_LENGTH
        )
    try:
        node = _Parser(expression).parse(strict)
    except RecursionError:  # only when called with the stack nearly full: MAX_DEPTH bounds the rest
        raise SQLSyntaxError("Expression nests too deeply for the remaining stack", expression, 0) from None
    return Expression(expression, node.fn)
