"""A mapping's regexes (file_pattern, archive_member, member_pattern, time.file_formats files, reject_limits files, a
points table's files cells, [[silence]] streams) are user input: they are matched by the `regex` package with a time
bound, so a pattern that backtracks without end, such as (a+)+ against 'aaaa...!', is one error line, never a hang."""

from __future__ import annotations

import functools

import regex

from pipeline.core.errors import ConfigError

# Far above what any real file name or stream id takes to match (microseconds), far below a hang a user would notice.
MATCH_SECONDS = 2.0


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern)


def fullmatch(pattern: str, text: str, what: str) -> regex.Match | None:
    """The match of `pattern` over the whole of `text`, or None; one ConfigError line naming `what` (the mapping key)
    when matching takes over MATCH_SECONDS."""
    try:
        return _compiled(pattern).fullmatch(text, timeout=MATCH_SECONDS)
    except TimeoutError:
        raise ConfigError(
            f"{what} {pattern!r} took over {MATCH_SECONDS:g} s to match {text[:80]!r} (a nested repetition such as "
            "(a+)+ backtracks without end); simplify the regex in the corpus mapping"
        ) from None
