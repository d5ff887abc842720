"""sql92: RocketMQ 4.9.8's SQL92 message filter (Java ``org.apache.rocketmq.filter``).

Expected results come from the 4.9.8 sources (``SelectorParser.jj`` and the classes of
``filter/expression``); the comments name the class whose code decides each case. Every table row
was also checked against the Java 4.9.8 ``SelectorParser`` itself.
"""

from __future__ import annotations

import contextlib
import pickle
import re
import time
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finchmq.protocol.sql92 import (
    MAX_DEPTH,
    MAX_EXPRESSION_LENGTH,
    Expression,
    SQLSyntaxError,
    compile_sql92,
)

TRUE, FALSE, NULL, ERROR = "TRUE", "FALSE", "NULL", "ERROR"


def outcome(expression: str, properties: Mapping[str, str] | None) -> str:
    """Java's evaluation result, told apart through the public API only.

    TRUE matches; FALSE makes ``NOT (x)`` match; NULL makes ``(x) OR TRUE`` match; ERROR (Java's
    evaluation threw, and the broker skips the message) makes none of them match, because the
    exception escapes ``OR`` before its right side is looked at (LogicExpression.createOR).
    """
    if compile_sql92(expression).evaluate(properties):
        return TRUE
    if compile_sql92(f"NOT ({expression})").evaluate(properties):
        return FALSE
    if compile_sql92(f"({expression}) OR TRUE").evaluate(properties):
        return NULL
    return ERROR


def syntax_error(expression: str, *, strict: bool = False) -> SQLSyntaxError:
    with pytest.raises(SQLSyntaxError) as info:
        compile_sql92(expression, strict=strict)
    return info.value


# --- evaluation tables: (expression, properties, Java's result) ------------------------------

EQUALITY = [
    # ComparisonExpression.doCreateEqual: a String property against a String literal
    ("a = 'x'", {"a": "x"}, TRUE),
    ("a = 'x'", {"a": "y"}, FALSE),
    ("a = 'x'", {"a": "X"}, FALSE),
    ("a = 'x'", {}, NULL),  # left null, right not: null
    ("'x' = a", {}, FALSE),  # right null, left not: FALSE (the check is not symmetric)
    ("a = b", {}, TRUE),  # null == null is TRUE
    ("a = b", {"a": "1", "b": "1"}, TRUE),
    ("a = b", {"a": "1", "b": "01"}, FALSE),  # two Strings: equals, no number conversion
    ("a = ''", {"a": ""}, TRUE),
    # createNotEqual is NOT(createEqual)
    ("a <> 'x'", {"a": "y"}, TRUE),
    ("a <> 'x'", {"a": "x"}, FALSE),
    ("a <> 'x'", {}, NULL),
    ("'x' <> a", {}, TRUE),  # NOT FALSE
    ("a <> b", {}, FALSE),
    # __compare(String, Integer): Integer.valueOf(property); a NumberFormatException makes
    # evaluate() throw, and ExpressionMessageFilter treats the throw as no match
    ("a = 1", {"a": "1"}, TRUE),
    ("a = 1", {"a": "01"}, TRUE),
    ("a = 1", {"a": "+1"}, TRUE),
    ("a = 1", {"a": "2"}, FALSE),
    ("a = 3", {"a": "\u0663"}, TRUE),  # Character.digit accepts any Unicode decimal digit
    ("a = 1", {"a": "1.0"}, ERROR),
    ("a = 1", {"a": " 1"}, ERROR),  # Integer.valueOf does not trim
    ("a = 1", {"a": "x"}, ERROR),
    ("a = 1", {"a": "5000000000"}, ERROR),  # beyond int
    ("a = 5000000000", {"a": "5000000000"}, TRUE),  # a Long literal: Long.valueOf
    ("a = 1L", {"a": "1"}, TRUE),
    # __compare(String, Double): Double.valueOf trims and takes suffixes, hex, NaN, Infinity
    ("a = 1.0", {"a": "1"}, TRUE),
    ("a = 1.0", {"a": " 1 "}, TRUE),
    ("a = 1.5", {"a": "1.5d"}, TRUE),
    ("a = 1.0", {"a": "0x1p0"}, TRUE),
    ("a = 1.0", {"a": "1_0"}, ERROR),
    # __compare(String, Boolean): Boolean.valueOf, i.e. equalsIgnoreCase("true")
    ("a = TRUE", {"a": "true"}, TRUE),
    ("a = TRUE", {"a": "tRuE"}, TRUE),
    ("a = TRUE", {"a": "yes"}, FALSE),
    ("a = FALSE", {"a": "yes"}, TRUE),  # anything but "true" is false
    ("TRUE = a", {"a": "true"}, ERROR),  # Boolean on the left casts it to String: ClassCastException
    ("TRUE = a", {}, FALSE),
    # other type pairs in __compare
    ("1 = 1.0", {}, TRUE),  # Integer widened to Double
    ("1 = TRUE", {}, FALSE),  # Integer vs Boolean: -1
    ("(a IS NULL) = 1", {}, FALSE),  # Boolean vs Integer: -1
    ("(a IS NULL) = 'true'", {}, ERROR),  # Boolean vs String: ClassCastException
    ("a = (b IS NULL)", {"a": "true"}, TRUE),
    ("a = 1 = 2", {"a": "1"}, FALSE),  # (a = 1) = 2
    # UnaryExpression.createNegate of a non-number is null
    ("a = -NULL", {"a": "1"}, FALSE),
    ("a = -NULL", {}, TRUE),
    ("a = -'x'", {}, TRUE),
]

ORDERING = [
    # ComparisonExpression.evaluate: String property against an Integer literal -> Integer.valueOf
    ("a > 1", {"a": "2"}, TRUE),
    ("a > 1", {"a": "1"}, FALSE),
    ("a > 1", {"a": "-5"}, FALSE),
    ("a > 1", {}, NULL),
    ("a > 1", {"a": "1.5"}, ERROR),
    ("a > 1", {"a": "x"}, ERROR),
    ("a > 1", {"a": "2147483648"}, ERROR),
    ("a >= 1", {"a": "1"}, TRUE),
    ("a >= 1", {"a": "0"}, FALSE),
    ("a < 1", {"a": "0"}, TRUE),
    ("a < 1", {"a": "1"}, FALSE),
    ("a <= 1", {"a": "1"}, TRUE),
    ("a <= 1", {"a": "2"}, FALSE),
    ("1 < a", {"a": "2"}, TRUE),
    ("a > 2147483648", {"a": "2147483649"}, TRUE),  # Long literal
    ("a > -1", {"a": "0"}, TRUE),
    ("a > -5", {"a": "-4"}, TRUE),
    # Double literal: Double.valueOf, ordered as Double.compareTo
    ("a > 1.5", {"a": "1.6"}, TRUE),
    ("a > 1.5", {"a": "1e1"}, TRUE),
    ("a > 1.5", {"a": "Infinity"}, TRUE),
    ("a > 1.5", {"a": "infinity"}, ERROR),  # case-sensitive
    ("a > 1.5", {"a": "NaN"}, TRUE),  # NaN is above everything
    ("a < 1.5", {"a": "NaN"}, FALSE),
    ("a < 0.5", {"a": "-0.0"}, TRUE),
    ("a > 3.1E10", {"a": str(3.1415 * 10**10)}, TRUE),  # ExpressionTest.testEvaluate_exponent
    # two Strings: both Double.valueOf, or the evaluation throws
    ("a > b", {"a": "10", "b": "9"}, TRUE),  # numeric, not "10" < "9"
    ("a > b", {"a": "2", "b": "10"}, FALSE),
    ("a > b", {"a": "x", "b": "1"}, ERROR),
    ("a > b", {"a": "1"}, NULL),
    ("a > -b", {"a": "1", "b": "2"}, NULL),  # negating a String gives null
]

BETWEEN = [
    # ComparisonExpression.createBetween: (a >= low) AND (a <= high)
    ("a BETWEEN 2 AND 10", {"a": "2"}, TRUE),
    ("a BETWEEN 2 AND 10", {"a": "10"}, TRUE),
    ("a BETWEEN 2 AND 10", {"a": "3"}, TRUE),
    ("a BETWEEN 2 AND 10", {"a": "1"}, FALSE),
    ("a BETWEEN 2 AND 10", {"a": "11"}, FALSE),
    ("a BETWEEN 2 AND 10", {}, NULL),
    ("a BETWEEN 2 AND 10", {"a": "x"}, ERROR),
    ("a BETWEEN 1.5 AND 2", {"a": "1.75"}, ERROR),  # a <= 2 parses "1.75" with Integer.valueOf
    ("a BETWEEN 1.5 AND 2.5", {"a": "1.75"}, TRUE),
    ("a BETWEEN -5 AND -1", {"a": "-3"}, TRUE),
    ("a BETWEEN -1 AND -5", {"a": "-3"}, FALSE),  # negations are no constants: not checked
    ("a BETWEEN b AND c", {"a": "2", "b": "1", "c": "3"}, TRUE),
    # createNotBetween: (a < low) OR (a > high)
    ("a NOT BETWEEN 2 AND 10", {"a": "1"}, TRUE),
    ("a NOT BETWEEN 2 AND 10", {"a": "11"}, TRUE),
    ("a NOT BETWEEN 2 AND 10", {"a": "2"}, FALSE),
    ("a NOT BETWEEN 2 AND 10", {"a": "10"}, FALSE),
    ("a NOT BETWEEN 2 AND 10", {}, NULL),
]

MEMBERSHIP = [
    # UnaryExpression.createInExpression: String equality only
    ("a IN ('3', '4', '5')", {"a": "3"}, TRUE),
    ("a IN ('3', '4', '5')", {"a": "5"}, TRUE),
    ("a IN ('3', '4', '5')", {"a": "8"}, FALSE),
    ("a IN ('3', '4', '5')", {"a": "03"}, FALSE),
    ("a IN ('3', '4', '5')", {}, NULL),
    ("a NOT IN ('3', '4', '5')", {"a": "8"}, TRUE),
    ("a NOT IN ('3', '4', '5')", {"a": "4"}, FALSE),
    ("a NOT IN ('3', '4', '5')", {}, NULL),
    ("a IN ('x''y')", {"a": "x'y"}, TRUE),
    ("a IN ('1', '2', '3', '4', '5', '6', '7')", {"a": "7"}, TRUE),  # Java's HashSet branch
    ("(a) IN ('x')", {"a": "x"}, TRUE),  # parentheses return the PropertyExpression itself
    ("+a IN ('x')", {"a": "x"}, TRUE),  # unary plus is a no-op
]

NULLS = [
    # ComparisonExpression.createIsNull: doCreateEqual(x, NULL)
    ("a IS NULL", {}, TRUE),
    ("a IS NULL", {"a": ""}, FALSE),
    ("a IS NOT NULL", {"a": ""}, TRUE),
    ("a IS NOT NULL", {}, FALSE),
    ("NULL IS NULL", {}, TRUE),
    ("1 IS NULL", {}, FALSE),
    ("A IS NULL", {"a": "1"}, TRUE),  # property names are case-sensitive
    ("a IS NOT NULL AND a = 'hello'", {"a": "hello"}, TRUE),  # ExpressionTest.testEvaluate_equal
    ("a IS NOT NULL AND a = 'hello'", {}, FALSE),
    ("a IS NULL OR a = 'hello'", {}, TRUE),  # ExpressionTest.testEvaluate_nullOr
    ("a IS NULL OR a = 'hello'", {"a": "abc"}, FALSE),
    ("a IS NOT NULL IS NULL", {}, FALSE),
]

BOOLEANS = [
    # UnaryExpression.createBooleanCast: a bare property is a boolean only if it is a Boolean,
    # and a property is always a String
    ("a", {"a": "true"}, FALSE),
    ("a", {}, NULL),
    ("+a", {"a": "x"}, FALSE),
    ("NOT a", {"a": "x"}, TRUE),
    ("NOT a", {}, NULL),
    # BooleanConstantExpression
    ("TRUE", {}, TRUE),
    ("FALSE", {}, FALSE),
    ("NULL", {}, NULL),
    ("NOT NULL", {}, NULL),
    ("NOT TRUE", {}, FALSE),
    ("NOT FALSE", {}, TRUE),
]

LOGIC = [
    # LogicExpression: evaluation throws out of the whole expression unless short-circuited
    ("a > 1 OR b = 'x'", {"a": "x", "b": "x"}, ERROR),
    ("b = 'x' OR a > 1", {"a": "x", "b": "x"}, TRUE),
    ("a > 1 AND b = 'x'", {"a": "x", "b": "y"}, ERROR),
    ("b = 'x' AND a > 1", {"a": "x", "b": "y"}, FALSE),
    ("NOT (a > 1)", {"a": "x"}, ERROR),
    ("a = 3 AND b <> 4 AND c > 5 AND d <= 4", {"a": "3", "b": "5", "c": "6", "d": "1"}, TRUE),
    ("a = 3 AND b <> 4 AND c > 5 AND d <= 4", {"a": "4", "b": "5", "c": "6", "d": "1"}, FALSE),
    ("a = 3 OR b <> 4 OR c > 5 OR d <= 4", {"a": "4", "b": "4", "c": "3", "d": "10"}, FALSE),
    ("a = 3 OR b <> 4 OR c > 5 OR d <= 4", {"a": "4", "b": "4", "c": "3", "d": "2"}, TRUE),
    ("a = TRUE OR b = FALSE", {"a": "true", "b": "false"}, TRUE),  # ExpressionTest.testEvaluate_boolean
    ("a = TRUE OR b = FALSE", {"a": "false", "b": "true"}, FALSE),
]

PRECEDENCE = [
    # SelectorParser.jj: NOT is a unaryExpr, so it binds tighter than any comparison
    ("NOT a = 1", {"a": "2"}, FALSE),  # (NOT a) = 1: Boolean vs Integer
    ("NOT (a = 1)", {"a": "2"}, TRUE),
    ("NOT a IS NULL", {}, TRUE),  # (NOT a) IS NULL
    ("NOT a IS NULL", {"a": "1"}, FALSE),
    ("NOT FALSE AND FALSE", {}, FALSE),  # (NOT FALSE) AND FALSE
    ("NOT (FALSE AND FALSE)", {}, TRUE),
    ("a = '1' OR b = '1' AND c = '1'", {"a": "1", "b": "2", "c": "2"}, TRUE),  # AND before OR
    ("(a = '1' OR b = '1') AND c = '1'", {"a": "1", "b": "2", "c": "2"}, FALSE),
    ("a = '1' AND b = '1' OR c = '1'", {"a": "2", "b": "2", "c": "1"}, TRUE),
    ("a = '1' AND (b = '1' OR c = '1')", {"a": "2", "b": "2", "c": "1"}, FALSE),
    ("a = 1 > 0", {"a": "true"}, TRUE),  # comparisons before equality: a = (1 > 0)
    ("((a = '1'))", {"a": "1"}, TRUE),
]

CASE_AND_LEXICAL = [
    # keywords are IGNORE_CASE tokens
    ("a is not null and b between 1 and 3 or c not in ('x')", {"a": "1", "b": "2"}, TRUE),
    ("a Is NoT nUlL aNd b BeTwEeN 1 AnD 3", {"a": "1", "b": "2"}, TRUE),
    ("a = true or b = False", {"a": "true"}, TRUE),
    ("a iS nULL", {}, TRUE),
    ("$a = '1' AND _b IS NULL AND a1 IS NULL", {"$a": "1"}, TRUE),
    # STRING_LITERAL: '' is a quote
    ("a = 'it''s'", {"a": "it's"}, TRUE),
    ("a = ''''", {"a": "'"}, TRUE),
    ("TAGS IS NOT NULL AND TAGS = '''''tag'''''", {"TAGS": "''tag''"}, TRUE),  # ExpressionTest
    ("a = 'x\ny'", {"a": "x\ny"}, TRUE),
    ("a = '\u00e9\u4e2d'", {"a": "\u00e9\u4e2d"}, TRUE),
    # DECIMAL_LITERAL and FLOATING_POINT_LITERAL
    ("a = 10l", {"a": "10"}, TRUE),
    ("a = 9223372036854775807", {"a": "9223372036854775807"}, TRUE),
    ("a = 5.", {"a": "5"}, TRUE),
    ("a = .5", {"a": "0.5"}, TRUE),
    ("a = 5e1", {"a": "50"}, TRUE),
    ("a = 5E+1", {"a": "50"}, TRUE),
    ("a = 5e-1", {"a": "0.5"}, TRUE),
    ("a > 4.9e-324", {"a": "1"}, TRUE),  # Double.MIN_VALUE itself is allowed
    # white space and comments
    ("a\t=\r\n1\f", {"a": "1"}, TRUE),
    ("a = 1 /* comment */ AND b = 2", {"a": "1", "b": "2"}, TRUE),
    ("-- comment\na = 1", {"a": "1"}, TRUE),
    ("a = 1 -- comment", {"a": "1"}, TRUE),  # no line end: "-" ends the expression (see below)
]

TABLES = EQUALITY + ORDERING + BETWEEN + MEMBERSHIP + NULLS + BOOLEANS + LOGIC + PRECEDENCE + CASE_AND_LEXICAL


def _ids(table: list[tuple[str, dict[str, str], str]]) -> list[str]:
    return [f"{expr} | {props} -> {want}" for expr, props, want in table]


@pytest.mark.parametrize(("expression", "properties", "expected"), TABLES, ids=_ids(TABLES))
def test_evaluation_follows_java(expression: str, properties: dict[str, str], expected: str) -> None:
    assert outcome(expression, properties) == expected
    assert compile_sql92(expression).evaluate(properties) is (expected == TRUE)


@pytest.mark.parametrize("left", [TRUE, FALSE, NULL])
@pytest.mark.parametrize("right", [TRUE, FALSE, NULL])
def test_three_valued_logic(left: str, right: str) -> None:
    # LogicExpression.createAND/createOR, UnaryExpression.createNOT
    rank = {FALSE: 0, NULL: 1, TRUE: 2}
    by_rank = {v: k for k, v in rank.items()}
    assert outcome(f"{left} AND {right}", {}) == by_rank[min(rank[left], rank[right])]
    assert outcome(f"{left} OR {right}", {}) == by_rank[max(rank[left], rank[right])]
    assert outcome(f"NOT {left}", {}) == by_rank[2 - rank[left]]


# --- the parser stops at the first token that cannot continue (JmsSelector has no <EOF>) -----

TRAILING = [
    # (expression, properties, whether it matches, offset strict mode reports)
    ("a = 1 b", {"a": "1"}, True, 6),
    ("a = 1 )", {"a": "1"}, True, 6),
    ("a = 0x10", {"a": "0"}, True, 5),  # no hex: "0" then the identifier "x10"
    ("a = 0x10", {"a": "16"}, False, 5),
    ("a = 010", {"a": "0"}, True, 5),  # no octal: "0" then "10"
    ("a IS NULL > 1", {}, True, 10),  # the equality loop cannot go on with ">"
    ("a LIKE 'x%'", {"a": "xyz"}, False, 2),  # no LIKE: the boolean cast of a, never TRUE
    ("a = 1 -- no line end", {"a": "1"}, True, 6),
]


@pytest.mark.parametrize(("expression", "properties", "matches", "position"), TRAILING)
def test_trailing_tokens_are_ignored_unless_strict(
    expression: str, properties: dict[str, str], matches: bool, position: int
) -> None:
    assert compile_sql92(expression).evaluate(properties) is matches
    error = syntax_error(expression, strict=True)
    assert error.position == position
    assert "<EOF>" in str(error)


def test_strict_accepts_complete_expressions() -> None:
    assert compile_sql92("a = 1 AND (b IN ('x') OR c IS NULL) -- done\n", strict=True).evaluate({"a": "1"})


def test_the_token_after_the_expression_is_still_lexed_and_checked() -> None:
    # Java's loops peek one token (two after NOT/IS) past the end: those must be valid
    assert syntax_error("a = 1 #").position == 6
    assert syntax_error("a = 1 'open").position == 6
    assert syntax_error("a = 1 NOT x").position == 10  # NOT must start NOT BETWEEN / NOT IN
    assert syntax_error("a = 1 IS").position == 8
    compile_sql92("a = 1 b #")  # the token after that is never read


# --- syntax errors ---------------------------------------------------------------------------

SYNTAX_ERRORS = [
    ("a >", 3, "<EOF>"),
    ("a = 'x", 4, "string literal"),
    ("a IN ()", 6, '")"'),
    ("(a = 1", 6, "<EOF>"),
    ("", 0, "<EOF>"),
    ("   ", 3, "<EOF>"),
    ("\n\t", 2, "<EOF>"),
    ("a = = 1", 4, '"="'),
    ("a == 1", 3, '"="'),
    ("a != 1", 2, '"!" (33)'),
    ("a BETWEEN 1 2", 12, '"2"'),
    ("a BETWEEN 1 AND", 15, "<EOF>"),
    ("a IS foo", 5, '"foo"'),
    ("a NOT LIKE 'x'", 6, '"LIKE"'),
    ("a IN ('x'", 9, "<EOF>"),
    ("a IN ('x',)", 10, '")"'),
    ("a IN (1)", 6, '"1"'),
    ("a IN 'x'", 5, "\"'x'\""),
    ("a = 1 AND", 9, "<EOF>"),
    ("NOT", 3, "<EOF>"),
    ("a = 1 /* open", 6, "comment"),
    ("\u00e9 = 1", 0, '"\u00e9" (233)'),
    ("a.b = 1", 1, '"." (46)'),
    ("a = .", 4, '"." (46)'),
    ("a = -", 5, "<EOF>"),
    ("()", 1, '")"'),
]


@pytest.mark.parametrize(("expression", "position", "found"), SYNTAX_ERRORS)
def test_syntax_errors_name_their_position(expression: str, position: int, found: str) -> None:
    error = syntax_error(expression)
    assert isinstance(error, ValueError)
    assert error.expression == expression
    assert error.position == position
    assert found in str(error)
    assert f"line 1, column {position + 1}" in str(error) or "\n" in expression


def test_error_position_on_a_later_line() -> None:
    error = syntax_error("a = 1\r\nAND b >")
    assert error.position == 14
    assert 'Encountered "<EOF>" at line 2, column 8. Was expecting one of: "NOT"' in str(error)


# Java's compile-time checks: SelectorParser.asBooleanExpression, ComparisonExpression.check*,
# createBetween, createInFilter, ConstantExpression.createFromDecimal/createFloat
SEMANTIC_ERRORS = [
    ("1", 0, "will not result in a boolean value"),
    ("'x'", 0, "will not result in a boolean value"),
    ("- a", 0, "will not result in a boolean value"),
    ("NOT 1", 4, "will not result in a boolean value"),
    ("a AND 1", 6, "will not result in a boolean value"),
    ("a = NULL", 4, "'NULL' cannot be compared"),
    ("NULL <> a", 0, "'NULL' cannot be compared"),
    ("TRUE = 1", 5, "'TRUE' cannot be compared with '1'"),
    ("FALSE = 'x'", 6, "cannot be compared with"),
    ("a > 'x'", 4, "Value ''x'' cannot be compared"),
    ("a > TRUE", 4, "cannot be compared"),
    ("a <= NULL", 5, "cannot be compared"),
    ("'x' < a", 0, "cannot be compared"),
    ("(a = 1) > 2", 1, "cannot be compared"),
    ("NOT a > 1", 0, "cannot be compared"),  # (NOT a) > 1
    ("NOT a BETWEEN 1 AND 2", 0, "cannot be compared"),
    ("a BETWEEN 'a' AND 'b'", 10, "cannot be compared"),
    ("a BETWEEN 10 AND 0", 2, "Illegal values of between"),  # ParserTest.testParse_illegalBetween
    ("a BETWEEN 2 AND 1.5", 2, "Illegal values of between"),
    ("a BETWEEN NULL AND 1", 2, "values can not be null"),
    ("-a IN ('x')", 3, "Expected a property for In expression"),
    ("NOT a IN ('x')", 6, "Expected a property for In expression"),
    ("1 IN ('x')", 2, "Expected a property for In expression"),
    ("a > 9223372036854775808", 4, 'For input string: "9223372036854775808"'),  # beyond long
    ("a = -9223372036854775808", 5, "For input string"),  # the literal is parsed before the minus
    ("a > 0.0", 4, "is less than 4.9E-324"),  # createFloat rejects anything below Double.MIN_VALUE
    ("a > 1e-400", 4, "is less than 4.9E-324"),
    ("a > 1e400", 4, "is greater than 1.7976931348623157E308"),
    ("a and between 2 and 10", 6, '"between"'),  # ParserTest.testParse_invalid
]


@pytest.mark.parametrize(("expression", "position", "message"), SEMANTIC_ERRORS)
def test_java_compile_time_checks(expression: str, position: int, message: str) -> None:
    error = syntax_error(expression)
    assert error.position == position
    assert message in str(error)
    assert f"line 1, column {position + 1}" in str(error)


def test_syntax_error_pickles() -> None:
    error = syntax_error("a >")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.expression, copy.position) == (str(error), error.expression, error.position)


# --- limits ----------------------------------------------------------------------------------


def test_nesting_up_to_max_depth_compiles() -> None:
    assert compile_sql92("(" * MAX_DEPTH + "a = '1'" + ")" * MAX_DEPTH).evaluate({"a": "1"})
    # 99 NOTs over the boolean cast of a String (FALSE): an odd count of NOTs is TRUE
    assert compile_sql92("NOT " * (MAX_DEPTH - 1) + "a").evaluate({"a": "x"})
    assert compile_sql92("a > " + "-" * MAX_DEPTH + "1").evaluate({"a": "2"})


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        ("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1), MAX_DEPTH),
        ("(" * MAX_EXPRESSION_LENGTH, MAX_DEPTH),
        ("NOT " * (MAX_DEPTH + 1) + "a", 4 * MAX_DEPTH),
        ("a = " + "-" * 1000 + "1", 4 + MAX_DEPTH),
        ("a = " + "-- " * 2000 + "1", 4 + MAX_DEPTH // 2 * 3),  # no line end: minus signs
    ],
    ids=["parentheses", "parenthesis-bomb", "not", "minus", "comment-lookalike"],
)
def test_nesting_beyond_max_depth_is_a_syntax_error(expression: str, position: int) -> None:
    error = syntax_error(expression)
    assert error.position == position
    assert "nests deeper" in str(error)


def test_tall_trees_are_rejected_without_recursion_errors() -> None:
    # left-deep chains need no nesting, but evaluating them would recurse once per operator
    assert "taller" in str(syntax_error("a" + " = 1" * 1000))
    assert "taller" in str(syntax_error("a" + " IS NULL" * 1000))


def test_long_and_or_chains_are_flat() -> None:
    chain = " OR ".join(f"a = '{i}'" for i in range(4000))
    assert compile_sql92(chain).evaluate({"a": "3999"})
    chain = " AND ".join(f"p{i} IS NULL" for i in range(3000))
    assert compile_sql92(chain).evaluate({})
    assert not compile_sql92(chain).evaluate({"p2999": "x"})


def test_length_limit() -> None:
    compile_sql92("a" * MAX_EXPRESSION_LENGTH)
    error = syntax_error("a" * (MAX_EXPRESSION_LENGTH + 1))
    assert error.position == MAX_EXPRESSION_LENGTH


def test_pathological_inputs_compile_in_linear_time() -> None:
    n = MAX_EXPRESSION_LENGTH - 8
    inputs = [
        "'" * n,  # runs of quotes
        "a = " + "'a''" * (n // 4),
        "a = " + "- " * (n // 2),
        "a = 1 " + "-- " * (n // 3),
        "a = 1 " + "/* " * (n // 3),
        "a > " + "1" * n,
        "a > 1." + "1" * n,
        "a IN (" + ",".join(["'x'"] * (n // 4)) + ")",
        " OR ".join(["a = 1"] * (n // 9)),
    ]
    # CPU time of this thread, not the clock: other processes (a loaded machine) do not count
    start = time.thread_time()
    for text in inputs:
        with contextlib.suppress(SQLSyntaxError):
            compile_sql92(text)
    assert time.thread_time() - start < 5.0  # ~0.1 s; quadratic behaviour would take minutes


# --- the Expression object -------------------------------------------------------------------


def test_compiled_expression_is_reusable() -> None:
    expression = compile_sql92("a > 5 AND b IN ('x', 'y')")
    assert isinstance(expression, Expression)
    assert expression.expression == "a > 5 AND b IN ('x', 'y')"
    assert repr(expression) == "Expression(\"a > 5 AND b IN ('x', 'y')\")"
    results = [expression.evaluate({"a": str(i), "b": "x"}) for i in range(10)]
    assert results == [False] * 6 + [True] * 4


def test_evaluate_takes_no_properties_as_empty() -> None:
    # MessageEvaluationContext.get returns null when the map is null
    assert compile_sql92("a IS NULL").evaluate(None)
    assert not compile_sql92("a = 'x'").evaluate(None)


class _Exploding(Mapping[str, str]):
    def __getitem__(self, key: str) -> str:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


def test_evaluate_never_raises_on_odd_mappings() -> None:
    # ExpressionMessageFilter catches Throwable around evaluate(): no match
    assert not compile_sql92("a IS NULL").evaluate(_Exploding())
    odd: dict[str, object] = {"a": 5, "b": None, "c": ["x"], "d": 1.5}
    assert compile_sql92("a = 5").evaluate(odd)  # type: ignore[arg-type]
    for text in ("a > 1", "b IS NULL", "c IN ('x')", "c = 'x'", "d > 1.0", "a > b"):
        compile_sql92(text).evaluate(odd)  # type: ignore[arg-type]


# --- fuzzing ---------------------------------------------------------------------------------

SQL_ALPHABET = "abcABC$_019.eELlxX '\"()=<>!,+-*/\n\t\r#NOTANDORISULBEWtrufs\u00e9"
TOKENS = [
    "a", "b", "A", "1", "0", "2147483648", "9223372036854775808", "1.5", ".5", "5.", "1e3", "0.0",
    "'x'", "''''", "'", "TRUE", "FALSE", "NULL", "NOT", "AND", "OR", "IS", "IN", "BETWEEN", "=", "<>",
    ">", ">=", "<", "<=", "(", ")", ",", "+", "-", "--", "/*", "*/", "\n", "LIKE", "#", "!=",
]  # fmt: skip


def _compiles_or_syntax_error(text: str) -> None:
    try:
        expression = compile_sql92(text)
    except SQLSyntaxError as error:
        assert error.expression == text
        assert 0 <= error.position <= len(text)
        return
    assert isinstance(expression.evaluate({"a": "1", "b": "x", "A": "true"}), bool)


@given(st.text(max_size=300))
def test_fuzz_arbitrary_text(text: str) -> None:
    _compiles_or_syntax_error(text)


@given(st.text(alphabet=SQL_ALPHABET, max_size=120))
def test_fuzz_sql_like_text(text: str) -> None:
    _compiles_or_syntax_error(text)


@given(st.lists(st.sampled_from(TOKENS), max_size=25), st.sampled_from([" ", ""]))
def test_fuzz_token_soup(tokens: list[str], separator: str) -> None:
    _compiles_or_syntax_error(separator.join(tokens))


NAMES = st.sampled_from(["a", "b", "c", "TAGS", "$x"])
VALUES = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["1", "-1", "+2", "3.5", "1e3", "NaN", "-0.0", "true", "x", "", "2147483648"]),
    st.integers(min_value=-(2**40), max_value=2**40).map(str),
    st.floats(allow_nan=True).map(repr),
)
PROPERTIES = st.dictionaries(NAMES, VALUES, max_size=5)


def _integer_literal(n: int) -> str:
    return f"{n}L" if n > 1000 else str(n)


NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1).map(_integer_literal),
    st.floats(min_value=1e-300, max_value=1e300).map(repr),
    st.integers(min_value=1, max_value=1000).map(lambda n: f"-{n}"),
)
STRINGS = st.text(max_size=6).map(lambda s: "'" + s.replace("'", "''") + "'")
SCALARS = st.one_of(NAMES, NUMBERS, STRINGS)


def _between(name: str, low: int, high: int, negated: bool) -> str:
    low, high = sorted((low, high))
    return f"{name} {'NOT ' if negated else ''}BETWEEN {low} AND {high}"


COMPARISONS = st.one_of(
    st.tuples(SCALARS, st.sampled_from(["=", "<>"]), SCALARS).map(" ".join),
    st.tuples(NAMES, st.sampled_from(["=", "<>"]), st.sampled_from(["TRUE", "FALSE"])).map(" ".join),
    st.tuples(st.one_of(NAMES, NUMBERS), st.sampled_from([">", ">=", "<", "<="]), NAMES).map(" ".join),
    st.tuples(NAMES, st.sampled_from([">", ">=", "<", "<="]), NUMBERS).map(" ".join),
    st.builds(_between, NAMES, st.integers(0, 100), st.integers(0, 100), st.booleans()),
    st.builds(
        lambda name, negated, values: f"{name} {'NOT ' if negated else ''}IN ({', '.join(values)})",
        NAMES,
        st.booleans(),
        st.lists(STRINGS, min_size=1, max_size=6),
    ),
    st.builds(lambda name, negated: f"{name} IS {'NOT ' if negated else ''}NULL", NAMES, st.booleans()),
    NAMES,
    st.sampled_from(["TRUE", "FALSE", "NULL"]),
)
BOOLEAN_EXPRESSIONS = st.recursive(
    COMPARISONS,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" AND ", " OR ", " and ", " Or "]), inner).map("".join),
        inner.map(lambda e: f"NOT ({e})"),
        inner.map(lambda e: f"({e})"),
    ),
    max_leaves=12,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(BOOLEAN_EXPRESSIONS, PROPERTIES)
def test_fuzz_valid_expressions_evaluate(text: str, properties: dict[str, str]) -> None:
    expression = compile_sql92(text, strict=True)
    matches = expression.evaluate(properties)
    assert isinstance(matches, bool)
    # three-valued logic: x and NOT x never both match; OR FALSE / AND TRUE change nothing
    assert not (matches and compile_sql92(f"NOT ({text})").evaluate(properties))
    assert compile_sql92(f"({text}) OR FALSE").evaluate(properties) is matches
    assert compile_sql92(f"TRUE AND ({text})").evaluate(properties) is matches


@given(BOOLEAN_EXPRESSIONS, BOOLEAN_EXPRESSIONS, PROPERTIES)
def test_fuzz_de_morgan(left: str, right: str, properties: dict[str, str]) -> None:
    # holds even for evaluations Java aborts, thanks to the left-to-right short circuit
    not_and = compile_sql92(f"NOT (({left}) AND ({right}))").evaluate(properties)
    assert compile_sql92(f"NOT ({left}) OR NOT ({right})").evaluate(properties) is not_and


def test_message_format_mentions_java_style_location() -> None:
    message = str(syntax_error("a > 'x' AND"))
    assert re.search(r"at line 1, column \d+", message)
