"""The bounded grammar of the unit an answer writes after its number ("kW", "m³/h", "kJ/(kg*K)"), read before pint.

pint evaluates a unit string with Python's tokenizer and arithmetic, so an agent's answer could make grading divide
by zero (`degC/0`), recurse past Python's limit (thousands of parentheses) or compute `9**9**9` for minutes. A unit
is read here first: names joined by `*`, `/`, `·` or a space, parentheses, and one small number per factor as its
power (`**`, `^` or superscripts); `1/s` may lead with a 1. Anything else is refused with why, and pint only ever
parses what this grammar accepts: short, shallow, and raised to a small power overall.
"""

from __future__ import annotations

import re

from pipeline.core.errors import shown

# The limits of a unit expression (one home: the grader and its tests read them from here).
MAX_LENGTH = 48  # characters: "kilojoule / (kilogram * kelvin)" is 31; declared spellings are matched before this
MAX_DEPTH = 3  # nested parentheses
MAX_POWER = 4  # |power| of any name once every enclosing exponent is applied: m³ and s⁻² pass, (km**4)**4 does not

SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
TOKEN = re.compile(
    r"(?P<space>\s+)|(?P<power>\*\*|\^)|(?P<join>[*/·⋅])|(?P<open>\()|(?P<close>\))"
    r"|(?P<super>[⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)|(?P<number>\d+(?:\.\d+)?)|(?P<sign>[+-])"
    r"|(?P<name>(?:[^\W\d]|[°%℃‰])+)"
)
SYMBOLS = "_°%℃‰"  # what a unit name may hold beside letters (°C, %)


class _Refused(ValueError):
    """Why a unit expression is outside the grammar."""


def refusal(text: str) -> str | None:
    """Why `text` is not a unit expression this grader reads (None: pint may parse it)."""
    if len(text) > MAX_LENGTH:
        return f"a unit of {len(text)} characters is longer than {MAX_LENGTH}"
    try:
        tokens = _tokens(text)
        parser = _Parser(tokens)
        power = parser.expression(0)
        if parser.at < len(tokens):
            raise _Refused(f"unexpected {shown(tokens[parser.at][1], 20)}")
    except _Refused as exc:
        return f"{shown(text)} is not a unit expression ({exc})"
    if power > MAX_POWER:
        return f"{shown(text)} raises a unit to the power {power:g}, more than {MAX_POWER}"
    return None


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token, spaces dropped; a character no token starts with is refused. A name ends at its
    first character that is not a letter or one of SYMBOLS (`m²` is m, then the power 2)."""
    tokens, at = [], 0
    while at < len(text):
        found = TOKEN.match(text, at)
        if found is None:
            raise _Refused(f"{shown(text[at])} is not part of a unit")
        kind, end = found.lastgroup, found.end()
        if kind == "name":
            end = next((i for i in range(at, end) if not (text[i].isalpha() or text[i] in SYMBOLS)), end)
            if end == at:
                raise _Refused(f"{shown(text[at])} is not part of a unit")
        if kind != "space":
            tokens.append((kind, text[at:end]))
        at = end
    return tokens


class _Parser:
    """Recursive descent over the tokens, never deeper than MAX_DEPTH parentheses. Each rule returns the largest
    |power| a name reaches inside what it read."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def kind(self) -> str | None:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else None

    def expression(self, depth: int) -> float:
        """factor ((`*` | `/` | `·` | nothing) factor)*"""
        power = self.factor(depth, leading=True)
        while self.kind() not in (None, "close"):
            if self.kind() == "join":
                self.at += 1
            power = max(power, self.factor(depth, leading=False))
        return power

    def factor(self, depth: int, leading: bool) -> float:
        """(name | `(` expression `)` | a leading 1 before `/`), then at most one exponent."""
        kind = self.kind()
        if kind == "name":
            self.at += 1
            power = 1.0
        elif kind == "open":
            if depth >= MAX_DEPTH:
                raise _Refused(f"parentheses nested deeper than {MAX_DEPTH}")
            self.at += 1
            power = self.expression(depth + 1)
            if self.kind() != "close":
                raise _Refused("a parenthesis is not closed")
            self.at += 1
        elif kind == "number" and leading and self.tokens[self.at][1] == "1" and self._next_is("/"):
            self.at += 1
            return 0.0
        elif kind is None:
            raise _Refused("a unit is missing")
        else:
            raise _Refused(
                f"{shown(self.tokens[self.at][1], 20)} where a unit name is expected (numbers only as powers)"
            )
        if self.kind() in ("power", "super"):
            power *= abs(self.exponent(depth))
            if self.kind() in ("power", "super"):
                raise _Refused("one power per unit: write m**6, not m**2**3")
        return power

    def exponent(self, depth: int) -> float:
        """`**` or `^` then a number (signed, or in parentheses, which count as nesting too), or superscript digits."""
        kind, text = self.tokens[self.at]
        self.at += 1
        if kind == "super":
            return float(text.translate(SUPERSCRIPTS))
        closing = self.kind() == "open"
        if closing and depth >= MAX_DEPTH:
            raise _Refused(f"parentheses nested deeper than {MAX_DEPTH}")
        self.at += closing
        sign = -1.0 if self.kind() == "sign" and self.tokens[self.at][1] == "-" else 1.0
        self.at += self.kind() == "sign"
        if self.kind() != "number":
            raise _Refused("a power must be a number")
        value = sign * float(self.tokens[self.at][1])
        self.at += 1
        if closing:
            if self.kind() != "close":
                raise _Refused("a parenthesis is not closed")
            self.at += 1
        return value

    def _next_is(self, text: str) -> bool:
        return self.at + 1 < len(self.tokens) and self.tokens[self.at + 1][1] == text
