"""Corpus mappings are validated on load; unknown keys and bad values name the key."""

from __future__ import annotations

import re

import pytest

from pipeline.core.config import load_mapping
from pipeline.core.errors import ConfigError
from tests.helpers import REPO, xai_config


def write(tmp_path, text: str, name: str = "xai4heat"):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["xai4heat", "hhw"])
def test_shipped_mappings_load(name):
    mapping = load_mapping(REPO / "configs" / "corpora" / f"{name}.toml")
    assert mapping.name == name and mapping.held_out_sites


def test_name_must_match_file(tmp_path):
    with pytest.raises(ConfigError, match="must equal the file name"):
        load_mapping(write(tmp_path, xai_config(), name="other"))


def test_invalid_toml(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_mapping(write(tmp_path, "name = "))


def test_bad_regex(tmp_path):
    text = xai_config().replace("file_pattern = 'xai4heat_scada_(?P<site>L\\d+)\\.csv'", "file_pattern = '(unclosed'")
    with pytest.raises(ConfigError, match="values.wide_csv.file_pattern"):
        load_mapping(write(tmp_path, text))


def test_wide_without_site_template_needs_brick(tmp_path):
    text = xai_config().replace('site = "{site}"\n', "", 1)
    with pytest.raises(ConfigError, match="values.site is required"):
        load_mapping(write(tmp_path, text))


def test_dropout_rows_only_for_wide(tmp_path):
    text = xai_config().replace('kind = "wide_csv"', 'kind = "long_csv"\nstream_column = "s"\nvalue_column = "v"')
    with pytest.raises(ConfigError, match="dropout_rows applies to wide_csv"):
        load_mapping(write(tmp_path, text))


def test_range_must_be_ordered(tmp_path):
    text = xai_config().replace("Thermal_Power_Sensor = [0.0, 20000.0]", "Thermal_Power_Sensor = [1.0, 0.0]")
    with pytest.raises(ConfigError, match="min 1.0 > max 0.0"):
        load_mapping(write(tmp_path, text))


@pytest.mark.parametrize("time_format", ["%Y-%m-%d %H:%M:%S", "epoch_s"])
def test_an_unknown_timezone_is_one_line_with_the_mapping(tmp_path, time_format):
    text = xai_config().replace('timezone = "Europe/Belgrade"', "timezone = 'Mars/Olympus'", 1)
    text = re.sub(r"^format = .*$", f"format = '{time_format}'", text, count=1, flags=re.MULTILINE)
    with pytest.raises(ConfigError, match=r"time\.timezone.*'Mars/Olympus' is not an IANA time zone") as caught:
        load_mapping(write(tmp_path, text))
    assert "\n" not in str(caught.value)
