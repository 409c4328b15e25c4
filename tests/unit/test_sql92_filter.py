"""SQL92 selectors (protocol/filter): grammar, upstream's checks and remarks, evaluation rules.

The property test draws random well-formed expression trees and property maps, prints each
tree as SQL text, and holds ``compile_sql92(text).matches(props)`` to a reference that walks
the tree directly with upstream's rules (4.9.7 ``ComparisonExpression``, ``LogicExpression``,
``UnaryExpression``): nested binary AND/OR, typed constants (Integer / Long / Double), Java's
conversions of property strings (``javalang``, tested on its own below) and "a throwing
evaluation matches nothing".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.protocol.filter import ExpressionType, FilterError, compile_sql92
from aiorocketmq.protocol.filter.javalang import (
    JavaLong,
    NumberFormatError,
    double_compare,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
)

# -- javalang ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text,value", [
    ("5", 5), ("+5", 5), ("-5", -5), ("2147483647", 2147483647), ("-2147483648", -2147483648),
    ("007", 7), ("\u0665", 5),  # Character.digit accepts any Unicode decimal digit
])
def test_parse_int_accepts(text: str, value: int) -> None:
    assert parse_int(text) == value


@pytest.mark.parametrize("text", ["", "+", "-", " 5", "5 ", "1_0", "2147483648", "1.0", "0x10", "5L"])
def test_parse_int_refuses(text: str) -> None:
    with pytest.raises(NumberFormatError):
        parse_int(text)


def test_parse_long_range() -> None:
    assert parse_long("9223372036854775807") == 2**63 - 1
    assert type(parse_long("1")) is JavaLong
    with pytest.raises(NumberFormatError):
        parse_long("9223372036854775808")


@pytest.mark.parametrize("text,value", [
    ("1.5", 1.5), (" 1.5\t", 1.5), ("1.", 1.0), (".5", 0.5), ("1e3", 1000.0), ("1.5f", 1.5),
    ("2D", 2.0), ("-0", -0.0), ("Infinity", math.inf), ("-Infinity", -math.inf),
    ("0x1.8p1", 3.0), ("1e400", math.inf),
])
def test_parse_double_accepts(text: str, value: float) -> None:
    assert double_compare(parse_double(text), value) == 0


@pytest.mark.parametrize("text", ["", "  ", "inf", "nan", "1_0", "1e", "e1", ".", "0x1.8", "1.5ff",
                                  "NaNf", "\u0665"])
def test_parse_double_refuses(text: str) -> None:
    with pytest.raises(NumberFormatError):
        parse_double(text)


def test_parse_double_nan() -> None:
    assert math.isnan(parse_double("NaN"))


def test_double_compare_is_javas() -> None:
    assert double_compare(-0.0, 0.0) == -1
    assert double_compare(math.nan, math.nan) == 0
    assert double_compare(math.nan, math.inf) == 1
    assert double_compare(1.0, 2.0) == -1


def test_parse_boolean() -> None:
    assert parse_boolean("TRUE") and parse_boolean("tRuE")
    assert not parse_boolean("yes") and not parse_boolean(" true") and not parse_boolean("")


def test_expression_type() -> None:
    assert ExpressionType.is_tag_type(None) and ExpressionType.is_tag_type("TAG")
    assert ExpressionType.is_tag_type("")
    assert not ExpressionType.is_tag_type("SQL92")


# -- grammar and evaluation by example ------------------------------------------------------------

P = {"a": "5", "b": "abc", "c": "1.5", "t": "true", "TAGS": "TagA", "big": "3000000000",
     "neg": "-7", "nan": "NaN", "e": ""}


@pytest.mark.parametrize("sql,expected", [
    # comparisons of numbers, with each literal type
    ("a = 5", True), ("a > 4", True), ("a >= 5", True), ("a < 5", False), ("a <= 5", True),
    ("a <> 5", False), ("a = 5.0", True), ("a = 5L", True), ("c > 1", False),  # "1.5" not an int
    ("c > 1.0", True), ("big = 3000000000", True), ("big > 5", False), ("neg < -6", True),
    ("neg = - 7", True), ("a > +4", True), ("nan > 1.0", True), ("nan = nan", True),
    ("a > c", True), ("c < a", True), ("b > a", False),
    # strings
    ("b = 'abc'", True), ("b <> 'abd'", True), ("b = 'ABC'", False), ("e = ''", True),
    ("'x' = 'x'", True), ("b = 5", False), ("a = '5'", True),
    # booleans
    ("t = TRUE", True), ("t = FALSE", False), ("b = TRUE", False), ("TRUE", True), ("FALSE", False),
    ("NULL", False), ("t", False), ("NOT t", True), ("missing", False), ("NOT missing", False),
    ("(a = 5) = TRUE", True), ("1 = TRUE", False), ("TRUE = FALSE", False),
    # BETWEEN and IN
    ("a BETWEEN 1 AND 5", True), ("a BETWEEN 6 AND 9", False), ("a NOT BETWEEN 6 AND 9", True),
    ("c BETWEEN 1.4 AND 1.6", True), ("a BETWEEN -10 AND 10", True),
    ("TAGS IN ('TagA', 'TagB')", True), ("TAGS NOT IN ('TagA')", False), ("a IN ('5')", True),
    ("missing IN ('x')", False), ("missing NOT IN ('x')", False),
    # IS [NOT] NULL and missing properties
    ("missing IS NULL", True), ("a IS NULL", False), ("a IS NOT NULL", True),
    ("missing IS NOT NULL", False), ("missing = 5", False), ("missing <> 5", False),
    ("NOT (missing = 5)", False), ("a = missing", False), ("a <> missing", True),
    ("missing <> a", False), ("missing = other", True), ("(missing > 1) IS NULL", True),
    # logic, three-valued
    ("a = 5 AND b = 'abc'", True), ("a = 5 AND missing = 1", False), ("a = 5 OR missing = 1", True),
    ("missing = 1 OR a = 5", True), ("NOT (missing = 1 OR a = 6)", False),
    ("NOT (missing = 1 AND a = 6)", True), ("a = 1 OR a = 2 OR a = 3 OR a = 5", True),
    # a failed conversion makes the whole message not match
    ("b > 1", False), ("NOT (b > 1)", False), ("b > 1 OR a = 5", False), ("a = 5 OR b > 1", True),
    ("a = 6 AND b > 1", False), ("b = 1 OR TRUE", False), ("TRUE = t", False),
    # case, comments, trailing tokens (upstream stops after the first complete expression)
    ("A = 5", False), ("a = 5 and B is null", True), ("a = 5 -- note\n", True),
    ("a /* x */ = 5", True), ("a = 5 b", True), ("a = 5)", True),
])
def test_evaluation(sql: str, expected: bool) -> None:
    assert compile_sql92(sql).matches(P) is expected


def test_no_properties() -> None:
    assert compile_sql92("a IS NULL").matches(None)
    assert not compile_sql92("a = 1").matches({})


@pytest.mark.parametrize("sql,remark", [
    ("5", "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a "
          "boolean value: 5"),
    ("'x'", "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a "
            "boolean value: 'x'"),
    ("a = NULL", "java.lang.RuntimeException: 'NULL' cannot be compared."),
    ("a > 'x'", "java.lang.RuntimeException: Value ''x'' cannot be compared."),
    ("a > TRUE", "java.lang.RuntimeException: Value 'TRUE' cannot be compared."),
    ("a > (b = 1)", "java.lang.RuntimeException: Value '(b == 1)' cannot be compared."),
    ("TRUE = 1", "java.lang.RuntimeException: 'TRUE' cannot be compared with '1'"),
    ("a BETWEEN 3 AND 1", "java.lang.RuntimeException: Illegal values of between, left value(3) "
                          "must less than or equal to right value(1)"),
    ("a BETWEEN NULL AND 1", "java.lang.RuntimeException: Illegal values of between, values can "
                             "not be null!"),
    ("5 IN ('a')", "java.lang.RuntimeException: Expected a property for In expression, got: 5"),
    ("a = 0.0", "java.lang.RuntimeException: 0.0 is less than 4.9E-324"),
    ("a = 1e400", "java.lang.RuntimeException: 1e400 is greater than 1.7976931348623157E308"),
    ("a = 9223372036854775808",
     'java.lang.NumberFormatException: For input string: "9223372036854775808"'),
    ("a # 1", 'org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line 1, column 3.'
              '  Encountered: "#" (35), after : ""'),
])
def test_compile_errors(sql: str, remark: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_sql92(sql)
    assert info.value.remark == remark


@pytest.mark.parametrize("sql", ["", "a =", "a NOT b", "a IS b", "a IN ()", "a IN (1)", "(a = 1",
                                 "a BETWEEN 1", "-a", "NOT 5", "a = 1 AND", "a != 1", "'open",
                                 "a IN ('x'", "a = 1 OR 5"])
def test_syntax_errors(sql: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_sql92(sql)
    assert info.value.remark.startswith(("org.apache.rocketmq.filter.parser.", "java.lang."))


def test_compiled_once_and_cached() -> None:
    assert compile_sql92("cached_prop > 1") is compile_sql92("cached_prop > 1")
    with pytest.raises(FilterError) as first:
        compile_sql92("cached_prop >")
    with pytest.raises(FilterError) as second:
        compile_sql92("cached_prop >")
    assert first.value is second.value


def test_long_or_chain_does_not_recurse_per_operand() -> None:
    sql = " OR ".join(f"a = {i}" for i in range(3000))
    assert compile_sql92(sql).matches({"a": "2999"})


# -- property test against a reference tree walker ----------------------------------------------


class Boom(Exception):
    """The reference's "upstream would throw here"."""


@dataclass(frozen=True)
class Const:
    value: Any  # None, bool, str, int (Integer), JavaLong, float

    def sql(self) -> str:
        v = self.value
        if v is None:
            return "NULL"
        if v is True or v is False:
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        if isinstance(v, float):
            return repr(v)
        return f"{int(v)}L" if type(v) is JavaLong and -(2**31) <= v < 2**31 else str(int(v))


@dataclass(frozen=True)
class Prop:
    name: str

    def sql(self) -> str:
        return self.name


@dataclass(frozen=True)
class Neg:
    operand: Any

    def sql(self) -> str:
        return f"-({self.operand.sql()})" if isinstance(self.operand, Neg) else f"-{self.operand.sql()}"


@dataclass(frozen=True)
class Cmp:
    op: str  # = <> > >= < <=
    left: Any
    right: Any

    def sql(self) -> str:
        return f"({self.left.sql()} {self.op} {self.right.sql()})"


@dataclass(frozen=True)
class Between:
    value: Any
    low: Any
    high: Any
    negated: bool

    def sql(self) -> str:
        kw = "NOT BETWEEN" if self.negated else "BETWEEN"
        return f"({self.value.sql()} {kw} {self.low.sql()} AND {self.high.sql()})"


@dataclass(frozen=True)
class In:
    prop: Prop
    items: tuple[str, ...]
    negated: bool

    def sql(self) -> str:
        items = ", ".join(Const(i).sql() for i in self.items)
        return f"({self.prop.sql()} {'NOT IN' if self.negated else 'IN'} ({items}))"


@dataclass(frozen=True)
class IsNull:
    operand: Any
    negated: bool

    def sql(self) -> str:
        return f"({self.operand.sql()} IS {'NOT ' if self.negated else ''}NULL)"


@dataclass(frozen=True)
class Logic:
    op: str  # AND / OR
    left: Any
    right: Any

    def sql(self) -> str:
        return f"({self.left.sql()} {self.op} {self.right.sql()})"


@dataclass(frozen=True)
class Not:
    operand: Any

    def sql(self) -> str:
        return f"(NOT {self.operand.sql()})"


def _num_type(v: Any) -> str:
    return {int: "I", JavaLong: "L", float: "D", bool: "B", str: "S"}[type(v)]


def ref_compare(lv: Any, rv: Any) -> int:
    """ComparisonExpression.__compare with convertStringExpressions, written as a table."""
    lt, rt = _num_type(lv), _num_type(rv)

    def cmp(a: Any, b: Any) -> int:
        if isinstance(a, float) or isinstance(b, float):
            return double_compare(float(a), float(b))
        return (a > b) - (a < b)

    try:
        if lt == rt:
            if lt == "S":
                a, b = lv.encode("utf-16-be"), rv.encode("utf-16-be")
                return (a > b) - (a < b)
            return cmp(lv, rv)
        conv = {"I": parse_int, "L": parse_long, "D": parse_double, "B": parse_boolean}
        if lt == "S" and rt in conv:
            return cmp(conv[rt](lv), rv)
        if lt == "B":
            if rt == "S":
                raise Boom("ClassCastException")
            return -1
        if rt == "S":
            return cmp(lv, conv[lt](rv))
        if rt == "B":
            return -1
        return cmp(lv, rv)  # number vs number, widened
    except NumberFormatError as exc:
        raise Boom(str(exc)) from exc


def ref_eval(node: Any, props: dict[str, str]) -> Any:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Prop):
        return props.get(node.name)
    if isinstance(node, Neg):
        v = ref_eval(node.operand, props)
        return -v if type(v) in (int, JavaLong, float) else None
    if isinstance(node, Cmp):
        lv = ref_eval(node.left, props)
        if node.op in ("=", "<>"):
            rv = ref_eval(node.right, props)
            if lv is None and rv is None:
                eq: Any = True
            elif lv is None:
                eq = None
            elif rv is None:
                eq = False
            else:
                eq = ref_compare(lv, rv) == 0
            return eq if node.op == "=" or eq is None else not eq
        if lv is None:
            return None
        rv = ref_eval(node.right, props)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            try:
                c = double_compare(parse_double(lv), parse_double(rv))
            except NumberFormatError as exc:
                raise Boom(str(exc)) from exc
        else:
            c = ref_compare(lv, rv)
        return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[node.op]
    if isinstance(node, Between):
        if node.negated:
            return ref_eval(Logic("OR", Cmp("<", node.value, node.low),
                                  Cmp(">", node.value, node.high)), props)
        return ref_eval(Logic("AND", Cmp(">=", node.value, node.low),
                              Cmp("<=", node.value, node.high)), props)
    if isinstance(node, In):
        v = props.get(node.prop.name)
        return None if v is None else (v in node.items) != node.negated
    if isinstance(node, IsNull):
        is_null = ref_eval(node.operand, props) is None
        return is_null != node.negated
    if isinstance(node, Not):
        v = ref_eval(node.operand, props)
        return None if v is None else not v
    if isinstance(node, Logic):
        lv = ref_eval(node.left, props)
        if node.op == "OR":
            if lv is True:
                return True
            rv = ref_eval(node.right, props)
            if rv is True:
                return True
            return None if lv is None or rv is None else False
        if lv is False:
            return False
        rv = ref_eval(node.right, props)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    if isinstance(node, Prop):  # pragma: no cover - props in boolean position are cast below
        raise AssertionError
    raise AssertionError(node)


def ref_matches(node: Any, props: dict[str, str]) -> bool:
    if isinstance(node, Prop):  # a bare property: UnaryExpression.createBooleanCast
        return False
    try:
        return ref_eval(node, props) is True
    except Boom:
        return False


NAMES = ["a", "b", "c", "TAGS"]
VALUES = ["0", "1", "5", "-3", "+2", "2147483647", "2147483648", "-9223372036854775808",
          "1.5", "-0.0", "0.0", "1e3", " 7", "NaN", "Infinity", "0x1p3", "abc", "", "true",
          "TRUE", "false", "TagA", "TagB", "it's", "\u0665"]

props_st = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=4)
prop_st = st.builds(Prop, st.sampled_from(NAMES + ["missing"]))
int_st = st.integers(min_value=0, max_value=2**31 - 1).map(int) | st.sampled_from([0, 1, 2, 5, 7])
long_st = st.integers(min_value=2**31, max_value=2**63 - 1).map(JavaLong) | st.sampled_from(
    [JavaLong(2**31), JavaLong(2147483648), JavaLong(9223372036854775807)])
double_st = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False) | st.sampled_from(
    [0.5, 1.5, 1000.0, 3.0])
number_st = st.one_of(st.builds(Const, int_st), st.builds(Const, long_st), st.builds(Const, double_st))
string_const_st = st.builds(Const, st.sampled_from(VALUES))
bool_const_st = st.builds(Const, st.sampled_from([True, False]))
# operands of <, >, ...: properties, numbers, negated numbers or properties
order_operand_st = st.one_of(prop_st, number_st, st.builds(Neg, number_st), st.builds(Neg, prop_st))


def _bool_exprs(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    comparable = children.filter(lambda n: not (isinstance(n, Const) and n.value is None))
    return st.one_of(
        st.builds(Logic, st.sampled_from(["AND", "OR"]), children, children),
        st.builds(Not, children),
        # equality may compare boolean sub-expressions with each other or with TRUE / FALSE
        st.builds(Cmp, st.sampled_from(["=", "<>"]), comparable, comparable | bool_const_st),
        st.builds(IsNull, children, st.booleans()),
    )


def _order_cmp() -> st.SearchStrategy[Any]:
    return st.builds(Cmp, st.sampled_from([">", ">=", "<", "<="]), order_operand_st, order_operand_st)


def _eq_cmp() -> st.SearchStrategy[Any]:
    operand = st.one_of(prop_st, number_st, string_const_st, st.builds(Neg, number_st))
    return st.one_of(
        st.builds(Cmp, st.sampled_from(["=", "<>"]), operand, operand | bool_const_st),
        st.builds(Cmp, st.sampled_from(["=", "<>"]), bool_const_st, bool_const_st | prop_st),
    )


def _between() -> st.SearchStrategy[Any]:
    def build(value: Any, a: Const, b: Const, negated: bool) -> Between:
        lo, hi = (a, b) if ref_compare(a.value, b.value) <= 0 else (b, a)
        return Between(value, lo, hi, negated)
    return st.builds(build, st.one_of(prop_st, st.builds(Neg, number_st)), number_st, number_st,
                     st.booleans())


def _in() -> st.SearchStrategy[Any]:
    return st.builds(In, prop_st, st.lists(st.sampled_from(VALUES), min_size=1, max_size=4).map(tuple),
                     st.booleans())


leaf_st = st.one_of(_order_cmp(), _eq_cmp(), _between(), _in(),
                    st.builds(IsNull, st.one_of(prop_st, number_st, string_const_st), st.booleans()),
                    st.builds(Const, st.sampled_from([True, False, None])))
expr_st = st.recursive(leaf_st, _bool_exprs, max_leaves=8) | prop_st


@settings(max_examples=1500, deadline=None)
@given(expr_st, props_st)
def test_matches_reference(tree: Any, props: dict[str, str]) -> None:
    sql = tree.sql()
    compiled = compile_sql92(sql)
    assert compiled.matches(props) is ref_matches(tree, props), (sql, props)
