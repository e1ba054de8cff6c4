"""Kubernetes resource quantities (resource.Quantity), parsed exactly as Kubernetes parses them.

Grammar (k8s.io/apimachinery/pkg/api/resource):

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>. | <digits>.<digits> | .<digits>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E          (decimal SI)
                 | Ki | Mi | Gi | Ti | Pi | Ei                     (binary SI)
                 | e<signed int> | E<signed int>                   (decimal exponent)

Kubernetes quirks kept on purpose: "1." and "1.G" parse; ".", "+", "-" parse as 0;
a non-zero value finer than 1n is rounded away from zero to the next nano
("0.9n" -> 1n); a binary-SI value is capped at 2^63-1 ("9Ei"). Whitespace is an
error (only the JSON decoder trims it). One deliberate limit: exponents beyond
+-1000 are refused rather than building astronomically large numbers.

Integer views round away from zero like Quantity.Value() / MilliValue().
Kueue counts CPU in milli-units and every other resource in whole units
(`resource_amount`), and writes quantities back in the format
`format_resource_amount` reproduces (ResourceFormatter.ResourceQuantity).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Literal

__all__ = [
    "QuantityError",
    "parse_quantity",
    "to_milli",
    "to_int",
    "canonical_quantity",
    "format_quantity",
    "format_value",
    "resource_amount",
    "format_resource_amount",
    "is_binary_resource",
]

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_EXPONENT = re.compile(r"[+-]?[0-9]+")
_MAX_BINARY = 2**63 - 1
_NANO = 10**9
_MAX_EXPONENT = 1000


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def _show(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split into (negative, integer digits, fraction digits, suffix) like parseQuantityString."""
    pos, end = 0, len(text)
    negative = False
    if pos < end and text[pos] in "+-":
        negative = text[pos] == "-"
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(f"bad quantity {_show(text)}: must match <sign><number><suffix>, e.g. 500m, 2, 1.5Gi")
    return negative, whole, frac, text[suffix_start:]


def _parse(text: str) -> tuple[Fraction, Format]:
    if text == "":
        raise QuantityError('bad quantity "": empty')
    negative, whole, frac, suffix = _scan(text)
    fmt: Format
    if suffix in _DECIMAL_SUFFIXES:
        fmt, base, exponent = "DecimalSI", 10, _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        fmt, base, exponent = "BinarySI", 2, _BINARY_SUFFIXES[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        fmt, base, exponent = "DecimalExponent", 10, int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"bad quantity {_show(text)}: exponent out of range")
    else:
        raise QuantityError(f"bad quantity {_show(text)}: unknown suffix {suffix!r}")

    mantissa = Fraction(int(whole + frac) if whole + frac else 0, 10 ** len(frac))
    value = mantissa * Fraction(base) ** exponent
    if value and (value * _NANO).denominator != 1:
        value = Fraction(math.ceil(value * _NANO), _NANO)  # away from zero (the sign is applied below)
    if fmt == "BinarySI":
        if value > _MAX_BINARY:
            value = Fraction(_MAX_BINARY)
        if 0 < value < 1:
            fmt = "DecimalSI"
    return (-value if negative else value), fmt


def _coerce(value: str | int | float | Fraction) -> str | Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"bad quantity {_show(value)}: a boolean is not a quantity")
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"bad quantity {_show(value)}: not a finite number")
        return repr(value)  # shortest round-trip text: 0.1 -> "0.1", 1e-05 -> "1e-05"
    raise QuantityError(f"bad quantity {_show(value)}: expected a string or a number")


def parse_quantity(value: str | int | float | Fraction) -> Fraction:
    """The exact value of a quantity ("500m" -> 1/2, "1Ki" -> 1024). Numbers are read as YAML users mean them."""
    v = _coerce(value)
    return v if isinstance(v, Fraction) else _parse(v)[0]


def _away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)


def to_milli(value: str | int | float | Fraction) -> int:
    """Quantity.MilliValue(): value * 1000, rounded away from zero ("1.5m" -> 2)."""
    return _away_from_zero(parse_quantity(value) * 1000)


def to_int(value: str | int | float | Fraction) -> int:
    """Quantity.Value(): rounded away from zero ("1500m" -> 2, "0.1" -> 1)."""
    return _away_from_zero(parse_quantity(value))


def canonical_quantity(value: str | int | float | Fraction) -> str:
    """What Kubernetes stores for this input (Quantity.String()): "1.5" -> "1500m", "1024Mi" -> "1Gi"."""
    v = _coerce(value)
    if isinstance(v, Fraction):
        return format_value(v, "DecimalSI")
    parsed, fmt = _parse(v)
    return format_value(parsed, fmt)


def format_value(value: Fraction | int, fmt: Format = "DecimalSI") -> str:
    """Canonical form of `value` in a Kubernetes format.

    DecimalSI: the largest power-of-1000 suffix that leaves an integer ("1500m",
    "2", "3k"; "1e21" past E). BinarySI: the largest power-of-1024 suffix that
    leaves an integer ("1536Mi", "1025"); values within (-1024, 1024) or with a
    fraction fall back to DecimalSI. Values finer than 1n round away from zero.
    """
    value = Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == "BinarySI" and magnitude >= 1024 and magnitude.denominator == 1:
        n, power = int(magnitude), 0
        while n % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
            n //= 1024
            power += 1
        return f"{sign}{n}{_BINARY_BY_POWER[power]}"
    nanos = math.ceil(magnitude * _NANO)
    exponent = -9
    while nanos % 10 == 0:
        nanos //= 10
        exponent += 1
    shift = exponent % 3  # down to a multiple of 3, so no fractional digits are needed
    nanos *= 10**shift
    exponent -= shift
    if fmt == "DecimalExponent":
        return f"{sign}{nanos}" + (f"e{exponent}" if exponent else "")
    suffix = _DECIMAL_BY_EXPONENT.get(exponent)
    return f"{sign}{nanos}{suffix if suffix is not None else f'e{exponent}'}"


def is_binary_resource(resource: str) -> bool:
    """Byte-valued resources Kueue prints with binary suffixes."""
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def _format_for(resource: str) -> Format:
    return "BinarySI" if is_binary_resource(resource) else "DecimalSI"


def format_quantity(milli: int, resource: str = "") -> str:
    """A milli-value as a quantity string, the way Kueue formats it for `resource`.

    Rule: memory, ephemeral-storage and hugepages-* use BinarySI
    (1610612736000 -> "1536Mi"; values below 1Ki or with a fraction stay
    decimal); every other resource uses DecimalSI (500 -> "500m", 2000 -> "2",
    2000000 -> "2k").
    """
    return format_value(Fraction(milli, 1000), _format_for(resource))


def resource_amount(resource: str, value: str | int | float | Fraction) -> int:
    """Kueue's integer view (resources.ResourceValue): milli-CPU for cpu, whole units for the rest."""
    return to_milli(value) if resource == "cpu" else to_int(value)


def format_resource_amount(resource: str, amount: int) -> str:
    """Inverse of `resource_amount`, formatted like Kueue's ResourceFormatter.ResourceQuantity."""
    if resource == "cpu":
        return format_value(Fraction(amount, 1000), "DecimalSI")
    return format_value(amount, _format_for(resource))
