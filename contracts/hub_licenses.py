"""The license ids the Hugging Face Hub lists (configs/hub_licenses.toml): a dataset card names its license by one of
them, or says `other` with a license_name and license_link."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from contracts.base import Frozen


class HubLicenses(Frozen):
    """configs/hub_licenses.toml: the Hub's license ids, as its documentation spells them."""

    ids: list[str] = Field(
        min_length=1, description="License ids in lower case, e.g. 'cc-by-4.0'; never 'other' or 'unknown'."
    )

    @field_validator("ids")
    @classmethod
    def _hub_spelling(cls, value: list[str]) -> list[str]:
        bad = [i for i in value if not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", i) or i in ("other", "unknown")]
        if bad:
            raise ValueError(f"ids {bad}: write the Hub's id in lower case; 'other' and 'unknown' name no license")
        return value
