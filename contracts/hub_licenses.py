"""The license ids the Hugging Face Hub lists (configs/hub_licenses.toml): a dataset card names its license by one of
them, or says `other` with a license_name and license_link."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

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

    spdx: dict[str, str] = Field(
        default={},
        description="SPDX identifier a mapping may name (as SPDX spells it) -> the Hub id its card says, or 'other' "
        "when the Hub does not list it.",
    )

    @model_validator(mode="after")
    def _spdx_to_listed_ids(self) -> HubLicenses:
        unlisted = sorted(k for k, v in self.spdx.items() if v != "other" and v not in self.ids)
        if unlisted:
            raise ValueError(f"spdx {unlisted}: each maps to one of ids, or to 'other' when the Hub does not list it")
        return self

    def spdx_id(self, text: str) -> str | None:
        """The SPDX identifier `text` names (case-insensitively), as SPDX spells it; None when it is not listed."""
        return next((k for k in self.spdx if k.lower() == text.strip().lower()), None)
