"""Timestamps in tool arguments and results: aware ISO 8601 in, UTC `Z` strings out, microseconds inside."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.core.errors import TimestampError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_us(text: object) -> int:
    """An ISO 8601 timestamp with a UTC offset or Z -> integer microseconds since the epoch (UTC)."""
    if not isinstance(text, str) or not text.strip():
        raise TimestampError(
            "malformed_timestamp", f"expected an ISO 8601 string such as '2023-01-05T10:00:00Z', got {text!r}"
        )
    raw = text.strip()
    cleaned = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        raise TimestampError(
            "malformed_timestamp", f"{raw!r} is not an ISO 8601 timestamp; use e.g. '2023-01-05T10:00:00Z'"
        ) from None
    if moment.tzinfo is None:
        raise TimestampError("naive_timestamp", f"{raw!r} has no UTC offset; add 'Z' or an offset such as '+01:00'")
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_us(us: int) -> str:
    """Microseconds UTC -> '2023-01-05T10:00:00Z' (fractional seconds only when present)."""
    moment = EPOCH + timedelta(microseconds=int(us))
    text = moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds")
    return text.replace("+00:00", "Z")
