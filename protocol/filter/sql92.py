"""SQL92 message selectors, parsed once and evaluated per message without re-parsing.

Mirrors upstream 4.9.7 ``org.apache.rocketmq.filter`` (``parser/SelectorParser.jj``,
``expression/ComparisonExpression``, ``LogicExpression``, ``UnaryExpression``,
``ConstantExpression``, ``PropertyExpression``), written anew as a hand-written
recursive-descent parser whose nodes are compiled straight into Python closures.

Grammar (keywords and identifiers case-insensitive; ``--`` line and ``/* */`` block
comments)::

    selector   := or                          (as a boolean; see below)
    or         := and ( OR and )*
    and        := equality ( AND equality )*
    equality   := comparison ( '=' comparison | '<>' comparison
                               | IS NULL | IS NOT NULL )*
    comparison := unary ( ('>' | '>=' | '<' | '<=') unary
                          | [NOT] BETWEEN unary AND unary
                          | [NOT] IN '(' string (',' string)* ')' )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | identifier | '(' or ')'
    literal    := 'string' | decimal[L] | float | TRUE | FALSE | NULL

Like upstream's parser, parsing stops after the first complete ``or``: tokens after it are
never read (``a = 1 b`` selects ``a = 1``), only the one token the parser peeked at must lex.

Compile-time checks are upstream's (each failure is a ``FilterError`` whose ``remark`` is
what a stock broker answers, ``cause.toString()`` of its ``MQFilterException``):
``>``, ``>=``, ``<``, ``<=`` and BETWEEN refuse string, boolean and NULL constants and
boolean sub-expressions; ``=`` and ``<>`` refuse NULL constants and ``TRUE = 1``; BETWEEN of
two number constants needs low <= high; IN needs a property on its left; a selector (and
each operand of AND, OR, NOT) must be boolean: a comparison, a boolean constant, or a bare
property (cast: a property's value is a string, so it evaluates to false, or to null when
missing); a decimal beyond ``long`` and a float of 0 (below ``Double.MIN_VALUE``) or
beyond ``Double.MAX_VALUE`` are refused.

Evaluation over a message's properties (all strings) is upstream's three-valued logic:

* a missing property is null; comparisons and IN with a null operand are null (``x = y``
  with only ``y`` missing is false, with only ``x`` missing is null: upstream's asymmetry);
  ``IS [NOT] NULL`` is never null; AND/OR/NOT follow SQL's three-valued tables and
  short-circuit left to right; a message matches only when the result is true;
* a property compared with a number constant is converted with ``Integer.valueOf`` /
  ``Long.valueOf`` / ``Double.valueOf`` by the constant's type; with TRUE/FALSE by
  ``Boolean.valueOf``; two properties in ``<``, ``>``, ... both with ``Double.valueOf``;
  unrelated types (number vs boolean) compare as "less";
* a string that does not convert makes upstream's evaluation throw, which its broker turns
  into "no match" for the whole message (not just the comparison): here ``EvaluationError``,
  and ``Sql92Expression.matches`` answers ``False``.

``compile_sql92`` caches compiled selectors by text (upstream ``SelectorParser.PARSE_CACHE``),
failures included, in a bounded LRU.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from .javalang import (
    JavaLong,
    NumberFormatError,
    double_compare,
    double_to_string,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
    string_compare,
)

__all__ = ["FilterError", "EvaluationError", "Sql92Expression", "compile_sql92", "PARSE_CACHE_SIZE"]

PARSE_CACHE_SIZE = 256

Props = Mapping[str, str]
Fn = Callable[[Props], Any]

_PARSE_EXCEPTION = "org.apache.rocketmq.filter.parser.ParseException"
_TOKEN_MGR_ERROR = "org.apache.rocketmq.filter.parser.TokenMgrError"
_RUNTIME_EXCEPTION = "java.lang.RuntimeException"
_NUMBER_FORMAT_EXCEPTION = "java.lang.NumberFormatException"

_DOUBLE_MAX = 1.7976931348623157e308
_DOUBLE_MIN = 5e-324  # Double.MIN_VALUE, the smallest positive double
_EMPTY: dict[str, str] = {}


class FilterError(ValueError):
    """An expression that does not compile (upstream ``MQFilterException``).

    ``remark`` is ``cause.toString()``, what upstream's ``checkClientConfig`` answers with
    SUBSCRIPTION_PARSE_FAILED, e.g. ``java.lang.RuntimeException: Value ''x'' cannot be
    compared.``.
    """

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.message = message

    @property
    def remark(self) -> str:
        return f"{self.java_class}: {self.message}"


class EvaluationError(Exception):
    """Upstream's evaluation would throw here; the message does not match at all."""


# -- lexer ---------------------------------------------------------------------------------

_KEYWORDS = frozenset(("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"))
_WS = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\n|\r\n?)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                    r"|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_ID = re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")
_OPERATORS = ("<>", ">=", "<=", "=", ">", "<", "(", ",", ")", "+", "-")

# SelectorParserConstants.tokenImage, for error messages.
_IMAGES = {"EOF": "<EOF>", "DECIMAL": "<DECIMAL_LITERAL>", "FLOAT": "<FLOATING_POINT_LITERAL>",
           "STRING": "<STRING_LITERAL>", "ID": "<ID>"}


def _image(kind: str) -> str:
    return _IMAGES.get(kind) or f'"{kind}"'


def _escape(s: str) -> str:
    return (s.replace("\\", "\\\\").replace("\b", "\\b").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\f", "\\f").replace("\r", "\\r").replace('"', '\\"').replace("'", "\\'"))


class _Token:
    __slots__ = ("kind", "image", "line", "column")

    def __init__(self, kind: str, image: str, line: int, column: int) -> None:
        self.kind = kind
        self.image = image
        self.line = line
        self.column = column


class _Lexer:
    """Tokens on demand, as JavaCC's token manager: a bad character fails only when reached."""

    __slots__ = ("_s", "_pos", "_line", "_line_start")

    def __init__(self, s: str) -> None:
        self._s = s
        self._pos = 0
        self._line = 1
        self._line_start = 0

    def _advance(self, end: int) -> None:
        s = self._s
        i = s.find("\n", self._pos, end)
        while i >= 0:
            self._line += 1
            self._line_start = i + 1
            i = s.find("\n", i + 1, end)
        self._pos = end

    def next(self) -> _Token:
        s = self._s
        n = len(s)
        while True:
            pos = self._pos
            if pos >= n:
                # JavaCC places EOF on the last character read (column 0 on an empty line)
                return _Token("EOF", "", self._line, pos - self._line_start)
            c = s[pos]
            if c in _WS:
                self._advance(pos + 1)
                continue
            m = None
            if c == "-":
                m = _LINE_COMMENT.match(s, pos)
            elif c == "/":
                m = _BLOCK_COMMENT.match(s, pos)
            if m is not None:
                self._advance(m.end())
                continue
            break
        line, column = self._line, pos - self._line_start + 1
        kind = ""
        end = pos
        if c.isascii() and (c.isdigit() or c == "."):
            fm = _FLOAT.match(s, pos)
            dm = _DECIMAL.match(s, pos)
            if fm is not None and (dm is None or fm.end() > dm.end()):
                kind, end = "FLOAT", fm.end()
            elif dm is not None:
                kind, end = "DECIMAL", dm.end()
        elif c == "'":
            m = _STRING.match(s, pos)
            if m is None:
                raise FilterError(_TOKEN_MGR_ERROR,
                                  f"Lexical error at line {line}, column {n - self._line_start + 1}."
                                  f"  Encountered: <EOF> after : \"{_escape(s[pos:])}\"")
            kind, end = "STRING", m.end()
        elif c.isascii() and (c.isalpha() or c in "_$"):
            m = _ID.match(s, pos)
            assert m is not None
            end = m.end()
            word = s[pos:end].upper()
            kind = word if word in _KEYWORDS else "ID"
        else:
            for op in _OPERATORS:
                if s.startswith(op, pos):
                    kind, end = op, pos + len(op)
                    break
        if not kind:
            raise FilterError(_TOKEN_MGR_ERROR,
                              f"Lexical error at line {line}, column {column}.  Encountered: "
                              f"\"{_escape(c)}\" ({ord(c)}), after : \"\"")
        self._advance(end)
        return _Token(kind, s[pos:end], line, column)


# -- Java comparison ---------------------------------------------------------------------------


def _int_cmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


def java_compare(lv: Any, rv: Any) -> int:
    """``ComparisonExpression.__compare(lv, rv, convertStringExpressions=true)``.

    Raises:
        EvaluationError: a string that does not convert (NumberFormatException), or a
            boolean constant on the left of a string (upstream's ClassCastException).
    """
    lt = type(lv)
    rt = type(rv)
    if lt is rt:
        if lt is float:
            return double_compare(lv, rv)
        if lt is str:
            return string_compare(lv, rv)
        return _int_cmp(lv, rv)
    try:
        if lt is str:
            if rt is int:
                return _int_cmp(parse_int(lv), rv)
            if rt is JavaLong:
                return _int_cmp(parse_long(lv), rv)
            if rt is float:
                return double_compare(parse_double(lv), rv)
            if rt is bool:
                return _int_cmp(parse_boolean(lv), rv)
            return -1
        if lt is int or lt is JavaLong:
            if rt is int or rt is JavaLong:
                return _int_cmp(lv, rv)
            if rt is float:
                return double_compare(float(lv), rv)
            if rt is str:
                return _int_cmp(lv, parse_int(rv) if lt is int else parse_long(rv))
            return -1
        if lt is float:
            if rt is int or rt is JavaLong:
                return double_compare(lv, float(rv))
            if rt is str:
                return double_compare(lv, parse_double(rv))
            return -1
        if lt is bool and rt is str:
            # upstream: lv = Boolean.valueOf((String) lv) on a Boolean -> ClassCastException
            raise EvaluationError(f"cannot compare {lv!r} with the string {rv!r}")
        return -1
    except NumberFormatError as exc:
        raise EvaluationError(str(exc)) from exc


# -- nodes ------------------------------------------------------------------------------------


class _Node:
    """One parsed expression: its closure and what upstream's compile-time checks look at."""

    __slots__ = ("fn", "text", "const", "static", "value", "prop", "boolean", "op", "children")

    def __init__(self, fn: Fn, text: str, *, const: bool = False, static: bool = False,
                 value: Any = None, prop: str | None = None, boolean: bool = False, op: str = "",
                 children: tuple[Fn, ...] = ()) -> None:
        self.fn = fn
        self.text = text
        self.const = const  # a ConstantExpression (TRUE, FALSE and NULL included)
        self.static = static or const  # the value is known now (a constant, or one negated)
        self.value = value
        self.prop = prop  # the name of a PropertyExpression
        self.boolean = boolean  # a BooleanExpression
        self.op = op  # "OR" / "AND": flattened n-ary logic
        self.children = children


def _const_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return double_to_string(value)
    return str(int(value))


def _java_str(value: Any) -> str:
    """``String.valueOf(value)``."""
    if isinstance(value, str):
        return value
    if type(value) is bool:
        return "true" if value else "false"
    return _const_text(value)


def _constant(value: Any, *, boolean: bool = False) -> _Node:
    def fn(p: Props) -> Any:
        return value
    return _Node(fn, _const_text(value), const=True, value=value, boolean=boolean)


def _property(name: str) -> _Node:
    def fn(p: Props) -> Any:
        return p.get(name)
    return _Node(fn, name, prop=name)


def _runtime(message: str) -> FilterError:
    return FilterError(_RUNTIME_EXCEPTION, message)


def _negate_value(v: Any) -> Any:
    t = type(v)
    if t is int or t is float or t is JavaLong:
        return -v
    return None  # null, or not a Number


def _negate(node: _Node) -> _Node:
    text = f"(- {node.text})"
    if node.static:
        value = _negate_value(node.value)

        def folded(p: Props) -> Any:
            return value
        return _Node(folded, text, static=True, value=value)
    inner = node.fn

    def fn(p: Props) -> Any:
        return _negate_value(inner(p))
    return _Node(fn, text)


def _boolean_cast(node: _Node) -> _Node:
    inner = node.fn

    def fn(p: Props) -> Any:
        v = inner(p)
        if v is None:
            return None
        return v if type(v) is bool else False
    return _Node(fn, node.text, boolean=True)


def _as_boolean(node: _Node) -> _Node:
    if node.boolean:
        return node
    if node.prop is not None:
        return _boolean_cast(node)
    raise FilterError(_PARSE_EXCEPTION, f"Expression will not result in a boolean value: {node.text}")


def _not(node: _Node) -> _Node:
    inner = node.fn

    def fn(p: Props) -> Any:
        v = inner(p)
        return None if v is None else not v
    return _Node(fn, f"(NOT {node.text})", boolean=True)


def _logic(op: str, left: _Node, right: _Node) -> _Node:
    # Left-deep chains are flattened into one n-ary node: the same order, short-circuit and
    # null rules as nested binary nodes, without one Python frame per operand.
    children = (left.children if left.op == op else (left.fn,)) + (
        right.children if right.op == op else (right.fn,))
    text = f"({left.text} {'||' if op == 'OR' else '&&'} {right.text})"
    if op == "OR":
        def fn(p: Props) -> Any:
            null = False
            for child in children:
                v = child(p)
                if v is True:
                    return True
                if v is None:
                    null = True
            return None if null else False
    else:
        def fn(p: Props) -> Any:
            null = False
            for child in children:
                v = child(p)
                if v is False:
                    return False
                if v is None:
                    null = True
            return None if null else True
    return _Node(fn, text, boolean=True, op=op, children=children)


def _check_less_than_operand(node: _Node) -> None:
    if node.const:
        v = node.value
        if type(v) in (int, float, JavaLong):
            return
        raise _runtime(f"Value '{node.text}' cannot be compared.")
    if node.boolean:
        raise _runtime(f"Value '{node.text}' cannot be compared.")


def _check_equal_operand(node: _Node) -> None:
    if node.const and node.value is None:
        raise _runtime(f"'{node.text}' cannot be compared.")


def _do_equal(left: _Node, right: _Node) -> _Node:
    lf = left.fn
    rf = right.fn

    def fn(p: Props) -> Any:
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        if type(lv) is type(rv) and lv == rv:
            return True
        return java_compare(lv, rv) == 0
    return _Node(fn, f"({left.text} == {right.text})", boolean=True)


def _equal(left: _Node, right: _Node) -> _Node:
    _check_equal_operand(left)
    _check_equal_operand(right)
    if left.const and right.const and left.boolean and not right.boolean:
        raise _runtime(f"'{left.text}' cannot be compared with '{right.text}'")
    return _do_equal(left, right)


def _is_null(left: _Node) -> _Node:
    lf = left.fn

    def fn(p: Props) -> Any:
        return lf(p) is None
    return _Node(fn, f"({left.text} == NULL)", boolean=True)


_ORDER_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}


def _order(symbol: str, left: _Node, right: _Node) -> _Node:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    lf = left.fn
    rf = right.fn
    test = _ORDER_TESTS[symbol]

    def fn(p: Props) -> Any:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            # upstream: comparing two strings by order converts both with Double.valueOf
            try:
                return test(double_compare(parse_double(lv), parse_double(rv)))
            except NumberFormatError as exc:
                raise EvaluationError(str(exc)) from exc
        return test(java_compare(lv, rv))
    return _Node(fn, f"({left.text} {symbol} {right.text})", boolean=True)


def _between(value: _Node, low: _Node, high: _Node) -> _Node:
    if low.const and high.const:
        lv, hv = low.value, high.value
        if lv is None or hv is None:
            raise _runtime("Illegal values of between, values can not be null!")
        try:
            wrong = java_compare(hv, lv) < 0
        except EvaluationError as exc:
            raise _runtime(str(exc)) from exc
        if wrong:
            raise _runtime(f"Illegal values of between, left value({_java_str(lv)}) "
                           f"must less than or equal to right value({_java_str(hv)})")
    return _logic("AND", _order(">=", value, low), _order("<=", value, high))


def _in(left: _Node, items: list[str], negated: bool) -> _Node:
    if left.prop is None:
        raise _runtime(f"Expected a property for In expression, got: {left.text}")
    name = left.prop
    values = frozenset(items)

    def fn(p: Props) -> Any:
        v = p.get(name)
        if v is None:
            return None
        return (v in values) is not negated
    symbol = "NOT IN" if negated else "IN"
    return _Node(fn, f"{name} {symbol} ( {', '.join(items)} )", boolean=True)


# -- parser ------------------------------------------------------------------------------------

# What upstream's ParseException lists where a unary expression was expected ("+" is taken
# by a syntactic lookahead, which JavaCC does not list).
_UNARY_START = ("NOT", "TRUE", "FALSE", "NULL", "DECIMAL", "FLOAT", "STRING", "ID", "(", "-")


class _Parser:
    """Recursive descent over ``SelectorParser.jj``'s productions, one method each."""

    __slots__ = ("_lexer", "_tokens")

    def __init__(self, text: str) -> None:
        self._lexer = _Lexer(text)
        self._tokens: list[_Token] = []

    def _peek(self, k: int = 0) -> _Token:
        tokens = self._tokens
        while len(tokens) <= k:
            tokens.append(self._lexer.next())
        return tokens[k]

    def _take(self) -> _Token:
        tok = self._peek()
        self._tokens.pop(0)
        return tok

    def _expect(self, kind: str, *alternatives: str) -> _Token:
        tok = self._peek()
        if tok.kind != kind:
            raise self._error(tok, (kind, *alternatives))
        return self._take()

    @staticmethod
    def _error(tok: _Token, expected: tuple[str, ...]) -> FilterError:
        found = "<EOF>" if tok.kind == "EOF" else f" {_image(tok.kind)} \"{_escape(tok.image)} \""
        lines = "".join(f"    {_image(k)} ...\n" for k in expected) + "    "
        return FilterError(_PARSE_EXCEPTION,
                           f"Encountered \"{found}\" at line {tok.line}, column {tok.column}.\n"
                           f"Was expecting{' one of' if len(expected) > 1 else ''}:\n{lines}")

    def selector(self) -> _Node:
        return _as_boolean(self.or_expression())

    def or_expression(self) -> _Node:
        left = self.and_expression()
        while self._peek().kind == "OR":
            self._take()
            right = self.and_expression()
            left = _logic("OR", _as_boolean(left), _as_boolean(right))
        return left

    def and_expression(self) -> _Node:
        left = self.equality_expression()
        while self._peek().kind == "AND":
            self._take()
            right = self.equality_expression()
            left = _logic("AND", _as_boolean(left), _as_boolean(right))
        return left

    def equality_expression(self) -> _Node:
        left = self.comparison_expression()
        while True:
            kind = self._peek().kind
            if kind == "=":
                self._take()
                left = _equal(left, self.comparison_expression())
            elif kind == "<>":
                self._take()
                left = _not(_equal(left, self.comparison_expression()))
            elif kind == "IS":
                self._take()
                if self._peek().kind == "NULL":
                    self._take()
                    left = _is_null(left)
                else:
                    self._expect("NOT", "NULL")
                    self._expect("NULL")
                    left = _not(_is_null(left))
            else:
                return left

    def comparison_expression(self) -> _Node:
        left = self.unary_expression()
        while True:
            kind = self._peek().kind
            if kind in _ORDER_TESTS:
                self._take()
                left = _order(kind, left, self.unary_expression())
            elif kind == "BETWEEN":
                self._take()
                low = self.unary_expression()
                self._expect("AND")
                left = _between(left, low, self.unary_expression())
            elif kind == "IN":
                self._take()
                left = _in(left, self._string_list(), False)
            elif kind == "NOT":
                # JavaCC enters the loop on NOT, then needs NOT BETWEEN or NOT IN (LOOKAHEAD 2)
                after = self._peek(1)
                if after.kind not in ("BETWEEN", "IN"):
                    raise self._error(after, ("BETWEEN", "IN"))
                self._take()
                if self._take().kind == "BETWEEN":
                    low = self.unary_expression()
                    self._expect("AND")
                    high = self.unary_expression()
                    left = _logic("OR", _order("<", left, low), _order(">", left, high))
                else:
                    left = _in(left, self._string_list(), True)
            else:
                return left

    def _string_list(self) -> list[str]:
        self._expect("(")
        items = [self._string()]
        while self._peek().kind == ",":
            self._take()
            items.append(self._string())
        self._expect(")", ",")
        return items

    def _string(self) -> str:
        image = self._expect("STRING").image
        return image[1:-1].replace("''", "'")

    def unary_expression(self) -> _Node:
        kind = self._peek().kind
        if kind == "+":
            self._take()
            return self.unary_expression()
        if kind == "-":
            self._take()
            return _negate(self.unary_expression())
        if kind == "NOT":
            self._take()
            return _not(_as_boolean(self.unary_expression()))
        return self.primary_expression()

    def primary_expression(self) -> _Node:
        tok = self._peek()
        kind = tok.kind
        if kind == "ID":
            self._take()
            return _property(tok.image)
        if kind == "(":
            self._take()
            node = self.or_expression()
            self._expect(")")
            return node
        if kind == "STRING":
            return _constant(self._string())
        if kind not in ("DECIMAL", "FLOAT", "TRUE", "FALSE", "NULL"):
            raise self._error(tok, _UNARY_START)
        self._take()
        if kind == "DECIMAL":
            return _constant(_decimal(tok.image))
        if kind == "FLOAT":
            return _constant(_float(tok.image))
        # BooleanConstantExpression TRUE / FALSE / NULL: constants that are also boolean
        return _constant({"TRUE": True, "FALSE": False}.get(kind), boolean=True)


def _decimal(image: str) -> int:
    # ConstantExpression.createFromDecimal: a Long, narrowed to Integer when it fits.
    text = image[:-1] if image[-1] in "lL" else image
    try:
        value = parse_long(text)
    except NumberFormatError as exc:
        raise FilterError(_NUMBER_FORMAT_EXCEPTION, str(exc)) from None
    return int(value) if -(1 << 31) <= value < (1 << 31) else value


def _float(image: str) -> float:
    value = float(image)
    if value > _DOUBLE_MAX:
        raise _runtime(f"{image} is greater than 1.7976931348623157E308")
    if value < _DOUBLE_MIN:
        raise _runtime(f"{image} is less than 4.9E-324")
    return value


# -- public API ----------------------------------------------------------------------------


class Sql92Expression:
    """A compiled selector (upstream ``BooleanExpression``); immutable, share it freely."""

    __slots__ = ("expression", "_fn", "_text")

    def __init__(self, expression: str, node: _Node) -> None:
        self.expression = expression
        self._fn = node.fn
        self._text = node.text

    def evaluate(self, properties: Props | None) -> bool | None:
        """The three-valued result (upstream ``evaluate``).

        Raises:
            EvaluationError: where upstream's evaluation throws.
        """
        result = self._fn(properties if properties is not None else _EMPTY)
        return result if result is None or type(result) is bool else None

    def matches(self, properties: Props | None) -> bool:
        """``True`` only when the selector is true for these properties (as upstream's
        ``ExpressionMessageFilter.isMatchedByCommitLog``: null, non-boolean or a throwing
        evaluation do not match)."""
        try:
            return self._fn(properties if properties is not None else _EMPTY) is True
        except EvaluationError:
            return False

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Sql92Expression({self.expression!r})"


_cache: OrderedDict[str, Sql92Expression | FilterError] = OrderedDict()


def compile_sql92(expression: str) -> Sql92Expression:
    """Parse and check ``expression`` once (cached by text, failures included).

    Raises:
        FilterError: the expression does not compile; ``remark`` says why, as upstream.
    """
    cached = _cache.get(expression)
    if cached is None:
        try:
            cached = Sql92Expression(expression, _Parser(expression).selector())
        except FilterError as exc:
            cached = exc
        except RecursionError:
            cached = FilterError("java.lang.StackOverflowError", "expression nested too deeply")
        _cache[expression] = cached
        if len(_cache) > PARSE_CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(expression)
    if isinstance(cached, FilterError):
        raise cached
    return cached
