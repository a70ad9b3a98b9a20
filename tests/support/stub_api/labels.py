"""Label selectors as the API server parses them from ``?labelSelector=``: a comma list of
``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)`` and
``key notin (a,b)`` (k8s.io/apimachinery ``labels.Parse``). Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: One requirement: the key, an operator, and the values of a set operator.
_SET = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_BINARY = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*$")


class SelectorError(ValueError):
    """A selector the API server would refuse (400 Bad Request)."""


@dataclass(frozen=True)
class Requirement:
    key: str
    #: exists, !, =, !=, in, notin
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!":
            return self.key not in labels
        if self.op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        # != and notin also match objects without the key, as upstream's do.
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


EVERYTHING = Selector()


def _split(text: str) -> list[str]:
    """Splits on the commas outside parentheses (``a in (x,y),b`` is two parts)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _requirement(part: str) -> Requirement:
    if m := _SET.match(part):
        values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
        return Requirement(m["key"], m["op"], values)
    if m := _BINARY.match(part):
        op = "=" if m["op"] in ("=", "==") else "!="
        return Requirement(m["key"], op, frozenset({m["value"]}))
    if m := _EXISTS.match(part):
        return Requirement(m["key"], "!" if m["neg"] else "exists")
    raise SelectorError(f"unable to parse requirement: {part!r}")


def parse(text: str | None) -> Selector:
    """The selector ``text`` says; the empty one selects everything."""
    if not text or not text.strip():
        return EVERYTHING
    return Selector(tuple(_requirement(p) for p in _split(text) if p.strip()))
