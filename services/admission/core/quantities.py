"""Formatting milli-unit quantities the way Kueue prints them in messages.

Kueue's ResourceFormatter formats byte-valued resources as BinarySI and then re-parses the text,
so a plain number comes back DecimalSI ("1000000" bytes prints as "1M"); kq.quantity.format_quantity
stops before that step, which is why messages use this function.
"""

from __future__ import annotations

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def _decimal(value: int, exponent: int) -> str:
    """Canonical DecimalSI form of value * 10**exponent."""
    if value == 0:
        return "0"
    while value % 10 == 0:
        value //= 10
        exponent += 1
    r = exponent % 3
    if r:
        value *= 10**r
        exponent -= r
    if exponent > 18:
        value *= 10 ** (exponent - 18)
        exponent = 18
    return f"{value}{_DECIMAL_SUFFIX[exponent]}"


def _binary_bytes(n: int) -> str:
    if -1024 < n < 1024:
        return _decimal(n, 0)
    e = 0
    while n % 1024 == 0 and e < 6:
        n //= 1024
        e += 1
    if e == 0:
        return _decimal(n, 0)  # Kueue re-parses the plain number as DecimalSI
    return f"{n}{_BINARY_SUFFIX[e]}"


def format_quantity(resource: str, milli: int) -> str:
    if resource == "cpu":
        return _decimal(milli, -3)
    if milli % 1000:
        return _decimal(milli, -3)
    units = milli // 1000
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return _binary_bytes(units)
    return _decimal(units, 0)
