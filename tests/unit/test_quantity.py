"""kq.quantity against Kubernetes' own resource.Quantity cases (apimachinery quantity_test.go)."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from kq.quantity import (
    QuantityError,
    canonical_quantity,
    format_quantity,
    format_resource_amount,
    format_value,
    parse_quantity,
    resource_amount,
    to_int,
    to_milli,
)

KI, MI, GI, TI, PI, EI = (1024**n for n in range(1, 7))

PARSE_CASES = [
    ("0", 0),
    ("0n", 0),
    ("0Ki", 0),
    ("0Ti", 0),
    ("1", 1),
    ("1Ki", KI),
    ("8Ki", 8 * KI),
    ("7Mi", 7 * MI),
    ("6Gi", 6 * GI),
    ("5Ti", 5 * TI),
    ("4Pi", 4 * PI),
    ("3Ei", 3 * EI),
    ("100Ti", 100 * TI),
    ("5n", F(5, 10**9)),
    ("4u", F(4, 10**6)),
    ("3m", F(3, 1000)),
    ("8k", 8000),
    ("50k", 50000),
    ("7M", 7 * 10**6),
    ("6G", 6 * 10**9),
    ("40T", 40 * 10**12),
    ("2P", 2 * 10**15),
    ("1E", 10**18),
    ("12E", 12 * 10**18),
    ("1E-3", F(1, 1000)),
    ("1e3", 1000),
    ("1E6", 10**6),
    ("1e14", 10**14),
    ("1E18", 10**18),
    ("100.035k", 100035),
    ("0.001", F(1, 1000)),
    ("0.0005k", F(1, 2)),
    ("0.00500", F(5, 1000)),
    ("0.5e0", F(1, 2)),
    ("0.5e-2", F(5, 1000)),
    ("10.035M", 10035000),
    ("1.2e3", 1200),
    ("1.3E+6", 1300000),
    ("1.40e9", 14 * 10**8),
    ("1.53E12", 153 * 10**10),
    ("9.01", F(901, 100)),
    ("8.1k", 8100),
    ("6.987654321G", 6987654321),
    ("2.5P", 25 * 10**14),
    ("1.01E", 101 * 10**16),
    ("1.5", F(3, 2)),
    (".5", F(1, 2)),
    ("+1.5", F(3, 2)),
    ("-1.5", F(-3, 2)),
    ("-1.025Ti", F(-1025, 1000) * TI),
    ("100.035Ki", F(100035, 1000) * KI),
    ("0.5Mi", MI // 2),
    ("0.05Gi", F(5, 100) * GI),
    # rounding: anything finer than 1n rounds away from zero to the next nano
    ("3.001n", F(4, 10**9)),
    ("1.1E-9", F(2, 10**9)),
    ("0.0000000001", F(1, 10**9)),
    ("0.5e-9", F(1, 10**9)),
    ("0.9n", F(1, 10**9)),
    ("0.00000012345", F(124, 10**9)),
    ("-0.9n", F(-1, 10**9)),
    ("0.000000000001Ki", F(2, 10**9)),
    # binary SI is capped at 2^63-1
    ("9Ei", 2**63 - 1),
    ("9223372036854775807Ki", 2**63 - 1),
    # "written by trolls", and accepted by Kubernetes
    (".001", F(1, 1000)),
    (".0001k", F(1, 10)),
    ("1.", 1),
    ("1.G", 10**9),
    (".", 0),
    ("-", 0),
    ("+", 0),
    ("007", 7),
    # numbers as YAML users write them
    (2, 2),
    (0.5, F(1, 2)),
    (0.1, F(1, 10)),
    (1e-05, F(1, 10**5)),
    (1.5e3, 1500),
    (F(3, 2), F(3, 2)),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES, ids=[str(c[0]) for c in PARSE_CASES])
def test_parse(text, expected):
    assert parse_quantity(text) == expected


INVALID = [
    "",
    "abc",
    "aoeu",
    "1.2.3",
    "1.1.M",
    "1+1.0M",
    "5 Gi",
    " 1",
    "1 ",
    "1ii",
    "0.1mi",
    "0.1am",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    "1e",
    "1Ee3",
    "1e3Ki",
    "1Mi5",
    "0x10",
    "1e1001",
    True,
    float("inf"),
    float("nan"),
    None,
    [1],
]


@pytest.mark.parametrize("text", INVALID, ids=[repr(t) for t in INVALID])
def test_invalid(text):
    with pytest.raises(QuantityError, match="bad quantity"):
        parse_quantity(text)


def test_error_quotes_the_input():
    with pytest.raises(QuantityError, match=r'^bad quantity "abc": '):
        parse_quantity("abc")


MILLI_CASES = [
    ("1", 1000, 1),
    ("500m", 500, 1),
    ("1.5", 1500, 2),
    ("1.5m", 2, 1),  # MilliValue rounds up
    ("0.1m", 1, 1),
    ("1n", 1, 1),
    ("1Ki", 1024000, 1024),
    ("1500m", 1500, 2),
    ("0", 0, 0),
    ("-1.5m", -2, -1),  # away from zero, as int64Amount does
    ("-1.5", -1500, -2),
    ("2", 2000, 2),
    (3, 3000, 3),
]


@pytest.mark.parametrize(("text", "milli", "value"), MILLI_CASES, ids=[str(c[0]) for c in MILLI_CASES])
def test_to_milli_and_to_int(text, milli, value):
    assert to_milli(text) == milli
    assert to_int(text) == value


# Kubernetes' String() of a parsed quantity (TestQuantityParseEmit, TestQuantityString alternates).
CANONICAL_CASES = [
    ("1Ki", "1Ki"),
    ("1024Mi", "1Gi"),
    ("1000M", "1G"),
    (".001Ki", "1024m"),
    (".000001Ki", "1024u"),
    (".000000001Ki", "1024n"),
    (".000000000001Ki", "2n"),
    ("1.5", "1500m"),
    ("1.5Gi", "1536Mi"),
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("5000m", "5"),
    ("0.001T", "1G"),
    ("1000u", "1m"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    ("1000E", "1e21"),
    ("0.001e12", "1e9"),
    ("1000e-12", "1e-9"),
    ("0.001e0", "1e-3"),
    ("00", "0"),
    ("-1Ki", "-1Ki"),
    ("-.001Ki", "-1024m"),
    ("9Ei", "9223372036854775807"),
    ("100.035Ki", "102435840m"),
    ("3e3", "3e3"),
    ("80e-3", "80e-3"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL_CASES, ids=[c[0] for c in CANONICAL_CASES])
def test_canonical(text, expected):
    assert canonical_quantity(text) == expected
    assert parse_quantity(expected) == parse_quantity(text)


FORMAT_CASES = [
    (500, "cpu", "500m"),
    (2000, "cpu", "2"),
    (1500, "cpu", "1500m"),
    (2_000_000, "cpu", "2k"),
    (0, "cpu", "0"),
    (1536 * MI * 1000, "memory", "1536Mi"),
    (GI * 1000, "memory", "1Gi"),
    (1025 * 1000, "memory", "1025"),
    (1000 * 1000, "memory", "1k"),  # below 1Ki binary SI falls back to decimal
    (500, "memory", "500m"),
    (2 * GI * 1000, "hugepages-2Mi", "2Gi"),
    (110_000, "pods", "110"),
    (1_000_000, "nvidia.com/gpu", "1k"),
    (4 * KI * 1000, "", "4096"),
]


@pytest.mark.parametrize(("milli", "resource", "expected"), FORMAT_CASES, ids=[f"{c[1]}-{c[2]}" for c in FORMAT_CASES])
def test_format_quantity(milli, resource, expected):
    assert format_quantity(milli, resource) == expected
    assert to_milli(expected) == milli


def test_format_value_binary_below_1ki_is_decimal():
    assert format_value(512, "BinarySI") == "512"
    assert format_value(F(1, 2), "BinarySI") == "500m"


RESOURCE_AMOUNT_CASES = [
    ("cpu", "1.5", 1500, "1500m"),
    ("cpu", "100m", 100, "100m"),
    ("memory", "1.5Gi", 1536 * MI, "1536Mi"),
    ("memory", "200Mi", 200 * MI, "200Mi"),
    ("memory", "1G", 10**9, "1000000000"),  # not a multiple of 1Ki: no binary suffix
    ("pods", "0.5", 1, "1"),  # whole units, rounded up like Quantity.Value()
    ("nvidia.com/gpu", 2, 2, "2"),
]


@pytest.mark.parametrize(
    ("resource", "text", "amount", "formatted"), RESOURCE_AMOUNT_CASES, ids=[f"{c[0]}-{c[1]}" for c in RESOURCE_AMOUNT_CASES]
)
def test_resource_amount_round_trip(resource, text, amount, formatted):
    assert resource_amount(resource, text) == amount
    assert format_resource_amount(resource, amount) == formatted
