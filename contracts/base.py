"""The one base model every contract derives from."""

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable model that rejects unknown fields, so a typo in a config is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")
