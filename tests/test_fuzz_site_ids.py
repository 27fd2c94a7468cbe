"""Site cells from a raw file's site column become site ids (issue 53): any cells, look-alike spellings (NFC and NFD,
spaces around, line and paragraph separators, zero-width and control characters) included, give each row the
NFC-normalized, stripped id of its cell (an id that normalizes to itself: one spelling per site), an empty cell the
missing_site reason, or one IngestError line naming two spellings of one id; never a traceback. Few examples in make
test, many in make fuzz."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import IngestError
from pipeline.ingest.layouts import MISSING_SITE, SITE, _input, _site_cells
from tests.helpers import fuzz_settings

LOOKALIKE = list("Ll8 \t\u00e9\u0301e\u2028\u2029\u200b\u00a0\x00\x1f|/\\.-_:") + [
    "e\u0301",
    "\u00c5",
    "A\u030a",
    "\ufb01",
]
CELLS = st.lists(
    st.none() | st.lists(st.sampled_from(LOOKALIKE), max_size=6).map("".join) | st.text(max_size=12),
    min_size=1,
    max_size=12,
)


@pytest.mark.fuzz
@fuzz_settings(50, 1500)
@given(CELLS)
def test_site_cells_give_one_normalized_id_each_or_one_line(cells):
    frame = pl.DataFrame(
        {_input("site"): cells, "ts_reason": [None] * len(cells)}, schema_overrides={"ts_reason": pl.String}
    )
    where = Path("raw/site_file.csv")
    try:
        read, ids = _site_cells(frame, "site", where)
    except IngestError as exc:
        text = str(exc)
        assert text.startswith(f"{where}: site_column 'site' holds ") and "\n" not in text, text
        return
    assert ids == sorted(set(ids)) and all(i and unicodedata.normalize("NFC", i).strip() == i for i in ids)
    for cell, site, reason in zip(cells, read[SITE].to_list(), read["ts_reason"].to_list(), strict=True):
        expected = None if cell is None else unicodedata.normalize("NFC", cell).strip() or None
        assert site == expected, (cell, site)
        assert (reason == MISSING_SITE) == (site is None), (cell, reason)
