"""Where things live: the project root, its configs, raw corpora and artifacts."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "TELEMETRY_BENCH_ROOT"


@dataclass(frozen=True)
class Workspace:
    """Paths of one project checkout; artifacts may be redirected (e.g. for replay builds)."""

    root: Path
    artifacts_dir: Path

    @classmethod
    def from_root(cls, root: Path | str | None = None, artifacts: Path | str | None = None) -> Workspace:
        base = Path(root or os.environ.get(ROOT_ENV) or Path.cwd()).resolve()
        return cls(root=base, artifacts_dir=Path(artifacts).resolve() if artifacts else base / "artifacts")

    @property
    def configs_dir(self) -> Path:
        return self.root / "configs"

    @property
    def corpora_config_dir(self) -> Path:
        return self.configs_dir / "corpora"

    def corpus_names(self) -> list[str]:
        """Every corpus with a mapping, sorted."""
        return sorted(path.stem for path in self.corpora_config_dir.glob("*.toml"))

    def corpus_config(self, corpus: str) -> Path:
        return self.corpora_config_dir / f"{corpus}.toml"

    def corpus_metadata_dir(self, corpus: str) -> Path:
        """configs/corpora/<corpus>/: metadata a user wrote for a corpus (points tables, graphs), beside its mapping."""
        return self.corpora_config_dir / corpus

    def raw_dir(self, corpus: str, declared: str | None = None) -> Path:
        return self.root / declared if declared else self.root / "data" / "raw" / corpus

    def stage_dir(self, corpus: str, stage: str) -> Path:
        return self.artifacts_dir / corpus / stage
