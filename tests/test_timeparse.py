"""Time columns to UTC microseconds, with a reason for every value that is not a time."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.corpus import TimeSpec
from pipeline.ingest.timeparse import _QUICK, _strptime, parse_times

S = 1_000_000


def parse(values: list[str | None], **spec) -> list[tuple[int | None, str | None]]:
    frame = parse_times(pl.DataFrame({"t": values}, schema={"t": pl.String}), "t", TimeSpec(column="t", **spec))
    return list(zip(frame["ts"].to_list(), frame["ts_reason"].to_list(), strict=True))


def test_iso8601_with_zone_offsets_fractions_and_naive_values():
    got = parse(
        [
            "2019-01-01T08:00:00Z",
            "2019-01-01T08:00:00.5+01:00",
            "2019-01-01 08:00:00",
            "2019-01-01T08:00:00.123456Z",
            "x",
            "",
        ],
        format="iso8601",
    )
    assert got == [
        (1546329600 * S, None),
        (1546326000 * S + 500_000, None),
        (1546329600 * S, None),
        (1546329600 * S + 123_456, None),
        (None, "bad_timestamp"),
        (None, "missing_timestamp"),
    ]


def test_iso8601_all_aware_takes_the_fast_path():
    assert parse(["2019-01-01T08:00:00Z", "2019-01-01T09:00:00Z"], format="iso8601") == [
        (1546329600 * S, None),
        (1546333200 * S, None),
    ]


def test_naive_iso_in_a_declared_zone():
    assert parse(["2021-07-01T12:00:00"], format="iso8601", timezone="Europe/Belgrade") == [(1625133600 * S, None)]


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        ("epoch_s", "1600000000.5", 1600000000 * S + 500_000),
        ("epoch_ms", "1600000000123", 1600000000 * S + 123_000),
        ("epoch_us", "1600000000123456", 1600000000123456),
    ],
)
def test_epoch_formats(fmt, text, expected):
    assert parse([text, "nan", "abc"], format=fmt) == [
        (expected, None),
        (None, "bad_timestamp"),
        (None, "bad_timestamp"),
    ]


def test_strftime_with_dst():
    got = parse(
        ["2021-03-28 02:00:00", "2021-10-31 02:30:00", "2021-03-28 03:00:00"],
        format="%Y-%m-%d %H:%M:%S",
        timezone="Europe/Belgrade",
        ambiguous="latest",
    )
    assert got == [(None, "nonexistent_local_time"), (1635643800 * S, None), (1616893200 * S, None)]


_PIECES = ["2024-04-04", "2024-03-31", " ", "T", "t", "02:30", ":00", ".25", "Z", "z", "+02:00", "-05", "+0530", "-"]


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4).map("".join), min_size=1, max_size=6),
    timezone=st.sampled_from(["UTC", "Europe/Belgrade"]),
)
def test_a_column_parses_as_each_of_its_values_alone(values, timezone):
    """Formats are skipped when no value of the column could match them (a literal character absent, no offset):
    skipping never changes what any value parses to, or its reason."""
    together = parse(values, format="iso8601", timezone=timezone)
    assert together == [parse([value], format="iso8601", timezone=timezone)[0] for value in values]


_DATES = st.tuples(
    st.integers(1, 9999),
    st.integers(0, 13),
    st.integers(0, 32),
    st.sampled_from(["T", " ", "t", "  "]),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 61),
    st.sampled_from(["", ".5", ".123456", ".1234567891", "."]),
    st.sampled_from(["", "Z", "z", "+00:00", "+01:30", "-05", "+0530", " Z"]),
).map(lambda p: f"{p[0]:04d}-{p[1]:02d}-{p[2]:02d}{p[3]}{p[4]:02d}:{p[5]:02d}:{p[6]:02d}{p[7]}{p[8]}")


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_DATES, min_size=1, max_size=8))
def test_quick_formats_parse_as_the_general_ones(values):
    """Values the quick format parses (no fraction; 'Z' as UTC) get what the general format gives them."""
    text = pl.Series("t", values, dtype=pl.String)
    for fmt in _QUICK:
        dtype = pl.Datetime("us", "UTC") if fmt.endswith("%#z") else pl.Datetime("us")
        assert _strptime(text, fmt, dtype).to_list() == text.str.strptime(dtype, fmt, strict=False).to_list(), fmt


def test_zone_abbreviations_are_read_with_the_offset_the_sites_zone_gives_them():
    """CST and CDT in America/Chicago (issue 52): each time its own offset; one without an abbreviation is local time;
    an abbreviation the zone never uses is a bad timestamp, not a guess."""
    got = parse(
        ["02-Mar-22 5:00:01 PM CST", "15-Jul-22 5:00:01 PM CDT", "15-Jul-22 5:00:01 PM", "15-Jul-22 5:00:01 PM PST"],
        format="%d-%b-%y %I:%M:%S %p %Z",
        timezone="America/Chicago",
    )
    march, july = 1646262001 * S, 1657922401 * S  # 23:00:01 and 22:00:01 UTC
    assert got == [(march, None), (july, None), (july, None), (None, "bad_timestamp")]


def test_a_strftime_format_with_an_offset_after_a_space():
    got = parse(["2021-09-07 00:00 +08:00", "2021-09-07 00:05 -03:30", "2021-09-07 00:10"], format="%Y-%m-%d %H:%M %:z")
    assert got == [(1630944000 * S, None), (1630985700 * S, None), (None, "bad_timestamp")]


def test_the_candidates_read_month_first_dates_and_say_where_both_readings_fit():
    from pipeline.ingest.timeparse import readings

    assert readings(["5/13/2022 0:05", "5/14/2022 13:05"]) == ["%m/%d/%Y %H:%M"]
    assert readings(["5/7/2022 0:05", "5/8/2022 13:05"]) == ["%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M"]
    assert readings(["13/5/2022 0:05"]) == ["%d/%m/%Y %H:%M"]
    assert readings(["2021-09-07 00:00 +08:00"]) == ["%Y-%m-%d %H:%M %:z"]
    assert readings(["02-Mar-22 5:00:01 PM CST"]) == ["%d-%b-%y %I:%M:%S %p %Z"]
    assert readings(["05/07/2022 5:00 PM"]) == ["%m/%d/%Y %I:%M %p", "%d/%m/%Y %I:%M %p"]  # PM is no zone


_CELLS = st.lists(
    st.one_of(
        st.sampled_from(["5/13/2022 0:05", "13/5/2022 17:05", "02-Mar-22 5:00:01 PM CST", "05/07/2022 5:00 PM", ""]),
        st.sampled_from(["2021-09-07 00:00 +08:00", "20220513170501", "20220513 1705", "13.05.2022 17:05", "Time"]),
        st.sampled_from(["2022/05/13 17:05:01", "12-May-2022 17:05:01", " 2022-05-13 17:05 ", "n/a", "PM", "-"]),
        st.text(alphabet="0123456789/-: .APMTZ+", max_size=22),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(cells=_CELLS)
def test_the_candidates_are_what_each_format_alone_reads(cells):
    """`readings` tries every candidate in one query, and none where a value holds no digit: the same formats, in the
    same order, as parsing the values with each candidate in turn (every candidate reads an hour, so digits)."""
    from pipeline.ingest.timeparse import AWARE_FORMAT, CANDIDATES, _zone_abbreviation, readings

    assert all("%H" in f or "%I" in f for f in CANDIDATES)
    text = pl.Series([c.strip() for c in cells if c.strip()], dtype=pl.String)
    expected = []
    if len(text):
        abbreviation, body = _zone_abbreviation(text)
        suffix = " %Z" if abbreviation.is_not_null().any() else ""
        text = body if suffix else text
        for fmt in CANDIDATES:
            dtype = pl.Datetime("us", "UTC") if AWARE_FORMAT.search(fmt) else pl.Datetime("us")
            if text.str.strptime(dtype, fmt, strict=False).null_count() == 0:
                expected.append(fmt + suffix)
    assert readings(cells) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"format": "%Y-%m-%d"},
        {"format": "%Y-%m-%d", "timezone": "Europe/Belgrade"},
        {"format": "iso8601"},
        {"format": "epoch_s"},
    ],
)
def test_a_time_outside_the_span_the_store_holds_is_a_reject(spec):
    values = (
        ["0000-01-01", "1899-12-31", "2020-01-01", "2200-01-02"]
        if spec["format"] != "epoch_s"
        else ["-62167219200", "-2208988801", "1577836800", "7258204800"]
    )
    got = parse(values, **spec)
    assert [reason for _, reason in got] == [
        "timestamp_out_of_span",
        "timestamp_out_of_span",
        None,
        "timestamp_out_of_span",
    ]
    assert [ts is None for ts, _ in got] == [True, True, False, True]
