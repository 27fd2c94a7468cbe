"""CLI commands of the tools: tool, tools, serve."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from pipeline.cli import common as cli
from pipeline.cli.runtime import EXPECT, release_options

if TYPE_CHECKING:
    from pipeline.tools.access import ToolStore


def _store(
    ctx: click.Context, corpus: str | None, release: str | None, cache_dir: str | None, expect: str | None = None
) -> tuple[str, ToolStore]:
    """The corpus and tool store of a project's corpus or of a release folder on its own (read-only); with `expect`,
    refused unless it is the store of the release of that digest (pipeline.harness.binding)."""
    from pipeline.cli.runtime import _release
    from pipeline.harness.binding import REBUILD, project_digest, require
    from pipeline.tools.api import open_tools

    chosen = _release(release, cache_dir, expect)
    if chosen is not None:
        if corpus and corpus != chosen.corpus:
            raise click.UsageError(f"--release {release} is a release of {chosen.corpus}, not {corpus}")
        return chosen.corpus, chosen.store()
    if not corpus:
        raise click.UsageError("give --corpus NAME (with --root DIR from another folder) or --release DIR")
    ws = cli.workspace(ctx)
    store = open_tools(ws, corpus)  # the corpus known and its store checked against the build's record first
    try:
        require(expect, f"the project's build of {corpus} is", project_digest(ws, corpus) if expect else None, REBUILD)
    except BaseException:
        store.close()
        raise
    return corpus, store


@click.command()
@click.argument("name")
@click.option("--corpus", help="Corpus whose tool store answers (with --release: the release's own).")
@click.option("--args", "arguments", default="{}", show_default=True, help="Arguments as a JSON object.")
@EXPECT
@release_options
@click.pass_context
@cli.handle_errors
def tool(
    ctx: click.Context,
    name: str,
    corpus: str | None,
    arguments: str,
    release: str | None,
    cache_dir: str | None,
    expect: str | None,
) -> None:
    """Call one tool and print its result as JSON (an error result is a result: exit status 0).

    \b
    Example:
      telemetry-bench tool resolve_point --corpus xai4heat --args '{"site": "L8", "point_class": "Leaving_Hot_Water_Temperature_Sensor", "equipment": "primary loop"}'
      telemetry-bench tool lookup_observation --corpus xai4heat --args '{"stream_id": "L8__t_sup_prim", "timestamp": "2022-01-10T10:24:00+01:00", "mode": "nearest"}'
      telemetry-bench tool inspect_quality --release artifacts/xai4heat/release --cache-dir /tmp/cache --args '{"stream_id": "L8__t_sup_prim"}'
    """  # noqa: E501 - the examples are runnable commands, one per line
    from pipeline.tools.api import run_tool

    cli.echo_json(run_tool(_store(ctx, corpus, release, cache_dir, expect)[1], name, arguments))


@click.command()
@click.option("--corpus", help="Check that this corpus has a tool store (the toolset is the same for every corpus).")
@click.option("--json", "as_json", is_flag=True, help="Print names, descriptions and JSON Schemas as JSON.")
@release_options
@click.pass_context
@cli.handle_errors
def tools(ctx: click.Context, corpus: str | None, as_json: bool, release: str | None, cache_dir: str | None) -> None:
    """List the tool registry: names, descriptions for agents, input and output schemas.

    \b
    Example:
      telemetry-bench tools --corpus xai4heat
      telemetry-bench tools --release artifacts/xai4heat/release --cache-dir /tmp/cache
    """
    from pipeline.tools.api import listing

    if corpus or release:
        _store(ctx, corpus, release, cache_dir)[1].close()
    data = listing()
    if as_json:
        cli.echo_json(data)
        return
    click.echo(f"registry version {data['registry_version']}")
    for item in data["tools"]:
        arguments = ", ".join(item["input_schema"].get("properties", {}))
        click.echo(f"\n{item['name']}({arguments})\n  {item['description']}")


@click.command()
@click.option(
    "--corpus", help="Corpus whose tool store the server exposes (with --root, or run from the project folder)."
)
@EXPECT
@release_options
@click.pass_context
@cli.handle_errors
def serve(
    ctx: click.Context, corpus: str | None, release: str | None, cache_dir: str | None, expect: str | None
) -> None:
    """Serve the corpus's tools over MCP on stdio (read-only), for any MCP client; it ends when stdin closes. Works
    from any folder: give --corpus with --root (or TELEMETRY_BENCH_ROOT), or --release DIR (docs/tools.md has a
    configuration for MCP hosts). Results are numbered c1, c2, ... per connection; a later argument may reference
    one as "$c1.stream_id".

    \b
    Example:
      telemetry-bench serve --corpus xai4heat
      telemetry-bench serve --release artifacts/xai4heat/release --cache-dir /tmp/cache
    """
    from pipeline.tools.server import serve_stdio

    served, store = _store(ctx, corpus, release, cache_dir, expect)
    serve_stdio(store, served)


@click.command()
@click.option("--check", is_flag=True, help="Exit 1 if a committed schema is missing or out of date, writing nothing.")
@click.pass_context
@cli.handle_errors
def schemas(ctx: click.Context, check: bool) -> None:
    """Write the JSON Schemas of every contract and tool to contracts/schemas/ (or check them).

    \b
    Example:
      telemetry-bench schemas --check
    """
    from pipeline.core.errors import ConfigError
    from pipeline.harness.schemas import stale, write

    folder = cli.workspace(ctx).root / "contracts" / "schemas"
    if check:
        outdated = stale(folder)
        if outdated:
            raise ConfigError(f"{folder}: out of date: {', '.join(outdated)}; run `telemetry-bench schemas` and commit")
        click.echo(f"{folder}: up to date")
        return
    written = write(folder)
    click.echo(f"{folder}: {len(written)} files written" + (f" ({', '.join(written)})" if written else ""))


COMMANDS = (tool, tools, serve, schemas)
