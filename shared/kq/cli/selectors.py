"""kubectl's label selector syntax (`kq get -l`) parsed into a metav1.LabelSelector. Pure.

    app=web,tier!=cache   env in (prod,staging)   env notin (dev)   gpu   !spot
"""

from __future__ import annotations

import re

from kq.api.meta import LabelSelector, LabelSelectorRequirement

_SET = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_KEY = re.compile(r"^[A-Za-z0-9./_-]+$")


class SelectorSyntaxError(ValueError):
    pass


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_selector(text: str) -> LabelSelector:
    labels: dict[str, str] = {}
    exprs: list[LabelSelectorRequirement] = []
    for part in _split(text):
        if m := _SET.match(part):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            if not values:
                raise SelectorSyntaxError(f"-l: {part!r}: {m.group(2)} needs at least one value")
            exprs.append(LabelSelectorRequirement(key=m.group(1), operator="In" if m.group(2) == "in" else "NotIn",
                                                  values=values))
        elif "!=" in part:
            key, _, value = (s.strip() for s in part.partition("!="))
            exprs.append(LabelSelectorRequirement(key=_key(key, part), operator="NotIn", values=(value,)))
        elif "=" in part:
            key, _, value = (s.strip() for s in part.replace("==", "=", 1).partition("="))
            labels[_key(key, part)] = value
        elif part.startswith("!"):
            exprs.append(LabelSelectorRequirement(key=_key(part[1:].strip(), part), operator="DoesNotExist"))
        else:
            exprs.append(LabelSelectorRequirement(key=_key(part, part), operator="Exists"))
    return LabelSelector(match_labels=labels, match_expressions=tuple(exprs))


def _key(key: str, part: str) -> str:
    if not _KEY.match(key):
        raise SelectorSyntaxError(f"-l: {part!r} is not a label requirement (KEY=VALUE, KEY!=VALUE, KEY in (A,B), "
                                  "KEY notin (A,B), KEY, !KEY)")
    return key
