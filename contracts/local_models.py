"""configs/local_models.toml: the local GGUF models `make model-smoke` plays and the slice it plays them on."""

from __future__ import annotations

from pydantic import Field, model_validator

from contracts.base import Frozen


class SmokeSettings(Frozen):
    """The fixed slice and the settings of every smoke run (docs/benchmarks.md quotes them beside the figures)."""

    release: str = Field(description="A shipped release folder, relative to the project root.")
    split: str
    limit: int = Field(ge=1, description="The first N episodes of the split.")
    max_tokens: int = Field(ge=1, description="The reply cap: the agent's --max-tokens and the server's own.")
    episode_tokens: int = Field(ge=1, description="The agent's --episode-tokens.")
    n_ctx: int = Field(ge=512, description="The server's context window in tokens.")
    chat_format: str
    start_timeout_s: float = Field(gt=0)
    threads: int = Field(ge=1)


class LocalModel(Frozen):
    """One GGUF file assembled from PyPI packages: by a package's assemble(), or by concatenating numbered parts."""

    module: str | None = Field(None, description="A package whose assemble(path) writes the file.")
    parts: str | None = Field(None, description="A module name with {} for 1..part_count; each has get_part_path().")
    part_count: int = Field(0, ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    extra: str = Field(description="The pyproject extra that installs the packages.")
    about: str

    @model_validator(mode="after")
    def _one_source(self) -> LocalModel:
        if (self.module is None) == (self.parts is None):
            raise ValueError("give exactly one of module and parts")
        if self.parts is not None and ("{}" not in self.parts or self.part_count < 1):
            raise ValueError("parts needs {} in its name and a part_count of at least 1")
        return self


class LocalModelsConfig(Frozen):
    smoke: SmokeSettings
    models: dict[str, LocalModel]
