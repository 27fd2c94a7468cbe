"""The dataset card names the raw data's license by the Hugging Face Hub's id when the Hub lists it
(configs/hub_licenses.toml), and says `license: other` with license_name and license_link only otherwise."""

from __future__ import annotations

import pytest
from huggingface_hub import DatasetCard

from pipeline.core.config import load_hub_licenses, load_mapping
from pipeline.core.errors import ConfigError
from pipeline.core.workspace import Workspace
from pipeline.release.card import card_license, dataset_card
from tests.helpers import REPO

WS = Workspace.from_root(REPO)
LICENSES = load_hub_licenses(WS)
HUB_IDS = LICENSES.ids
MANIFEST = {"splits": {"train": 1, "dev": 1, "test": 1}, "counts": {"family": {}, "commitment_outcome": {}}}


def card_keys(license_id: str, license_url: str = "https://example.org/terms") -> dict:
    mapping = load_mapping(WS.corpus_config("xai4heat")).model_copy(
        update={"license_id": license_id, "license_url": license_url}
    )
    text = dataset_card(mapping, MANIFEST, card_license(mapping, LICENSES), "0" * 64)
    return DatasetCard(text).data.to_dict()


@pytest.mark.parametrize(
    ("spdx", "hub"), [("CC-BY-4.0", "cc-by-4.0"), ("MIT", "mit"), ("BSD-2-Clause", "bsd-2-clause")]
)
def test_a_license_the_hub_lists_is_named_by_its_id(spdx, hub):
    data = card_keys(spdx)
    assert data["license"] == hub
    assert "license_name" not in data and "license_link" not in data


def test_a_license_the_hub_does_not_list_is_other_with_name_and_link():
    assert "ogl-uk-3.0" not in HUB_IDS
    data = card_keys("OGL-UK-3.0", "https://www.nationalarchives.gov.uk/doc/open-government-licence/version/3/")
    assert data["license"] == "other" and data["license_name"] == "ogl-uk-3.0"
    assert data["license_link"] == "https://www.nationalarchives.gov.uk/doc/open-government-licence/version/3/"


def test_a_corpus_that_writes_no_license_names_its_own_terms():
    base = load_mapping(WS.corpus_config("xai4heat")).model_dump(exclude={"license_id", "license_url", "license"})
    mapping = type(load_mapping(WS.corpus_config("xai4heat"))).model_validate(base)
    data = DatasetCard(dataset_card(mapping, MANIFEST, card_license(mapping, LICENSES), "0" * 64)).data.to_dict()
    assert data["license"] == "other" and data["license_name"] == "xai4heat-data-license"
    assert data["license_link"] == "README.md"


def test_the_list_refuses_other_and_upper_case(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "hub_licenses.toml").write_text('ids = ["mit", "CC-BY-4.0", "other"]\n')
    with pytest.raises(ConfigError, match=r"hub_licenses\.toml.*CC-BY-4\.0.*other"):
        load_hub_licenses(Workspace.from_root(tmp_path))


def written_license(license: str) -> dict:
    """The card keys of a mapping that writes only `license` (as a drafted mapping does), no license_id."""
    base = load_mapping(WS.corpus_config("xai4heat")).model_dump(exclude={"license_id", "license_url", "license"})
    mapping = type(load_mapping(WS.corpus_config("xai4heat"))).model_validate({**base, "license": license})
    return DatasetCard(dataset_card(mapping, MANIFEST, card_license(mapping, LICENSES), "0" * 64)).data.to_dict()


@pytest.mark.parametrize(
    ("written", "hub"),
    [
        ("BSD-2-Clause", "bsd-2-clause"),
        ("bsd-2-clause", "bsd-2-clause"),
        ("ODbL-1.0", "odbl"),
        ("PDDL-1.0", "pddl"),
        ("CC-BY-SA-4.0", "cc-by-sa-4.0"),
        ("MIT (repository LICENSE file)", "mit"),
    ],
)
def test_an_spdx_license_written_in_the_mapping_names_the_card_license(written, hub):
    data = written_license(written)
    assert data["license"] == hub
    assert "license_name" not in data


def test_an_spdx_id_the_hub_does_not_list_is_other_named_by_it():
    data = written_license("OGL-UK-3.0")
    assert data["license"] == "other" and data["license_name"] == "ogl-uk-3.0"


@pytest.mark.parametrize("written", ["BSD", "TODO: the raw data's license", "free to use"])
def test_an_unknown_license_is_one_line_listing_the_accepted_forms(written):
    with pytest.raises(ConfigError) as info:
        written_license(written)
    message = str(info.value)
    assert "\n" not in message
    assert "names no license we know" in message
    assert all(spdx in message for spdx in ("CC-BY-4.0", "ODbL-1.0", "BSD-2-Clause", "PDDL-1.0", "MIT"))


def test_every_shipped_mapping_names_a_license_the_card_keeps():
    for corpus in ("daiad", "hhw", "pvdaq", "ucam", "xai4heat"):
        keys = card_license(load_mapping(WS.corpus_config(corpus)), LICENSES)
        assert keys["license"] != "other", corpus
