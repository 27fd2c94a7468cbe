"""Test helpers: tiny workspaces built from slices of the real shipped corpora."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import polars as pl
from click.testing import CliRunner, Result

from pipeline.cli import main
from pipeline.core.config import load_mapping
from pipeline.core.workspace import Workspace
from pipeline.harness.build import build

REPO = Path(__file__).resolve().parents[1]
# The corpora shipped with a release (artifacts/<name>/release/, committed): what a build of every corpus releases.
SHIPPED = tuple(sorted(p.parent.parent.name for p in (REPO / "artifacts").glob("*/release/release.json")))
RAW = REPO / "data" / "raw"
FUZZ_ENV = "TELEMETRY_BENCH_FUZZ"  # set by `make fuzz`: the fuzz tests draw their large example counts


def fuzz_settings(default: int, fuzz: int):
    """Hypothesis settings of a fuzz test: in `make test` few examples, the same ones every run (derandomized); in
    `make fuzz` many, new ones each run (a failure prints the example to replay)."""
    from hypothesis import HealthCheck, settings

    fuzzing = bool(os.environ.get(FUZZ_ENV))
    return settings(
        max_examples=fuzz if fuzzing else default,
        deadline=None,
        derandomize=not fuzzing,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


def run_cli(artifacts: Path, *args: str) -> Result:
    """The CLI on the repository's configs and raw data, writing into the given artifacts folder."""
    return CliRunner().invoke(main, ["--root", str(REPO), "--artifacts", str(artifacts), *args])


def verify_cli(folder: Path) -> Result:
    """`verify --release FOLDER`."""
    return CliRunner().invoke(main, ["--root", str(REPO), "verify", "--release", str(folder)])


def real_lines(rel: str, numbers: Iterable[int]) -> list[str]:
    """Header plus the given 1-based line numbers of a shipped raw file, verbatim."""
    lines = (RAW / rel).read_text(encoding="utf-8").splitlines()
    return [lines[0]] + [lines[n - 1] for n in numbers]


def make_workspace(tmp: Path, name: str, config: str, files: dict[str, str | bytes]) -> Workspace:
    """A project root with one corpus mapping and its raw files (text or bytes)."""
    (tmp / "configs" / "corpora").mkdir(parents=True, exist_ok=True)
    (tmp / "configs" / "corpora" / f"{name}.toml").write_text(config, encoding="utf-8")
    copy_shared_configs(tmp)
    raw = tmp / "data" / "raw" / name
    raw.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        target = raw / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return Workspace.from_root(tmp)


def copy_shared_configs(root: Path) -> None:
    """configs/*.toml other than corpus mappings (build, families, episodes), unless already there."""
    for shared in sorted((REPO / "configs").glob("*.toml")):
        if not (root / "configs" / shared.name).exists():
            shutil.copyfile(shared, root / "configs" / shared.name)


def copy_config(name: str) -> str:
    return (REPO / "configs" / "corpora" / f"{name}.toml").read_text(encoding="utf-8")


def copy_real(tmp: Path, corpus: str, rels: list[str]) -> None:
    for rel in rels:
        target = tmp / "data" / "raw" / corpus / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(RAW / corpus / rel, target)


def ingest(ws: Workspace, name: str) -> dict[str, pl.DataFrame]:
    """Run ingest for one corpus and load every normalized table."""
    build(ws, [name], until="ingest")
    out = ws.stage_dir(name, "ingest")
    return {p.stem: pl.read_parquet(p) for p in out.glob("*.parquet")}


def mapping(ws: Workspace, name: str):
    return load_mapping(ws.corpus_config(name))


XAI_HEADER = "datetime,t_amb,t_ref,t_sup_prim,t_ret_prim,t_sup_sec,t_ret_sec,e,pe"


def xai_config(**overrides: str) -> str:
    """The shipped xai4heat mapping, with `key = value` lines replaced where asked."""
    text = copy_config("xai4heat")
    for key, value in overrides.items():
        lines = text.splitlines()
        lines = [f"{key} = {value}" if line.split("=")[0].strip() == key else line for line in lines]
        text = "\n".join(lines) + "\n"
    return text


# Every 24th record of a whole shipped file: small, but years long, as time-blocked splits need (3 blocks, 2 buffers).
TINY_XAI = "\n".join(real_lines("xai4heat/xai4heat_scada_L8.csv", range(2, 31244, 24))) + "\n"
TINY_HHW = "\n".join(real_lines("hhw/timeseries/127hhw_system_data.csv", range(2, 17557, 24))) + "\n"


def tiny_workspace(root: Path) -> Workspace:
    """A project of thinned copies of both shipped CSV corpora (no held-out site), quick to build end to end."""
    (root / "configs" / "corpora").mkdir(parents=True)
    copy_shared_configs(root)
    (root / "configs" / "corpora" / "xai4heat.toml").write_text(xai_config(held_out_sites="[]"))
    (root / "configs" / "corpora" / "hhw.toml").write_text(
        copy_config("hhw").replace('held_out_sites = ["building124"]', "held_out_sites = []")
    )
    raw = root / "data" / "raw"
    (raw / "xai4heat").mkdir(parents=True)
    (raw / "xai4heat" / "xai4heat_scada_L8.csv").write_text(TINY_XAI)
    (raw / "hhw" / "brick").mkdir(parents=True)
    (raw / "hhw" / "timeseries").mkdir(parents=True)
    shutil.copyfile(
        REPO / "data/raw/hhw/brick/building_127_condensing_m.ttl", raw / "hhw/brick/building_127_condensing_m.ttl"
    )
    (raw / "hhw" / "timeseries" / "127hhw_system_data.csv").write_text(TINY_HHW)
    return Workspace.from_root(root)


def run_in(ws, *args: str):
    """The CLI on a workspace's project folder (--root), as a user would run it there."""
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(main, ["--root", str(ws.root), *args])


def fails(result, *fragments: str) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    message = result.output.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def process_alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its parent to reap it does not); read from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
