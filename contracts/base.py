"""The one base model every contract derives from."""

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Frozen(BaseModel):
    """Immutable model that rejects unknown fields, so a typo in a config is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Grown(Frozen):
    """A frozen model that gained fields after its dumps entered identity hashes: each field in ADDED is left out of
    a dump while it holds its default, so a mapping that does not use it keeps its identity (and its release bytes)."""

    ADDED: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_unused_additions(self, handler: SerializerFunctionWrapHandler) -> dict:
        data = handler(self)
        for name in self.ADDED:
            if getattr(self, name) == type(self).model_fields[name].get_default(call_default_factory=True):
                data.pop(name, None)
        return data
