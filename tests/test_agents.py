"""Agents brought by users (docs/agents.md): a Python class, a process speaking JSON lines, the gym API."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time

import pytest
from pydantic import TypeAdapter

from contracts.agent_io import AgentInput, EpisodeStart
from contracts.protocol import Action
from pipeline.core.canonical import canonical_bytes
from pipeline.core.errors import GymError
from pipeline.harness.gym import TelemetryEnv, register
from pipeline.runtime.gold_path import gold_actions
from tests.helpers import REPO, run_cli

PYTHON = shlex.quote(sys.executable)
REPLAY_CMD = f"{PYTHON} {shlex.quote(str(REPO / 'examples' / 'agents' / 'replay_cmd.py'))}"


def scores(summary: dict) -> dict:
    """A run's summary without what names the player or measures its speed: who played, where the trace is, times."""
    return {k: v for k, v in summary.items() if k not in ("identity", "traces", "latency_ms")}


@pytest.fixture(scope="session")
def oracle(real_artifacts, tmp_path_factory):
    """The oracle's trace of the xai4heat test split and its score summary."""
    out = tmp_path_factory.mktemp("oracle") / "oracle.jsonl"
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--agent",
        "oracle",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    return out, json.loads(result.output)


def actions_of(trace) -> list:
    return [
        json.loads(line).get("action")
        for line in trace.read_text().splitlines()[1:]
        if json.loads(line)["type"] == "turn"
    ]


def test_python_agent_replaying_the_oracle_scores_as_the_oracle(real_artifacts, oracle, tmp_path, monkeypatch):
    trace, summary = oracle
    monkeypatch.chdir(REPO)  # module:factory imports from the current folder
    out = tmp_path / "py.jsonl"
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--agent",
        "examples.agents.replay:ReplayAgent",
        "--agent-option",
        f"trace={trace}",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert scores(json.loads(result.output)) == scores(summary) and summary["accomplished_rate"] == 1.0
    assert actions_of(out) == actions_of(trace)
    assert json.loads(out.read_text().splitlines()[0])["agent"] == "examples.agents.replay:ReplayAgent"


def test_command_agent_replaying_the_oracle_scores_as_the_oracle(real_artifacts, oracle, tmp_path):
    trace, summary = oracle
    out = tmp_path / "cmd.jsonl"
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--agent-cmd",
        f"{REPLAY_CMD} {shlex.quote(str(trace))}",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert scores(json.loads(result.output)) == scores(summary)
    assert actions_of(out) == actions_of(trace)


def test_the_command_agent_reads_what_the_schemas_say(real_artifacts, oracle, tmp_path):
    """Every line the runner writes validates against agent_input; the recorded actions against agent_output."""
    trace, _ = oracle
    log = tmp_path / "seen.jsonl"
    tee = tmp_path / "tee.py"
    tee.write_text(
        "import subprocess, sys\n"
        f"log = open({str(log)!r}, 'w')\n"
        f"agent = subprocess.Popen([{sys.executable!r}, {str(REPO / 'examples/agents/replay_cmd.py')!r}, "
        f"{str(trace)!r}],"
        " stdin=subprocess.PIPE, stdout=sys.stdout, text=True, bufsize=1)\n"
        "for line in sys.stdin:\n    log.write(line); log.flush(); agent.stdin.write(line); agent.stdin.flush()\n"
    )
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--limit",
        "2",
        "--agent-cmd",
        f"{PYTHON} {shlex.quote(str(tee))}",
        "--out",
        str(tmp_path / "t.jsonl"),
        "--json",
    )
    assert result.exit_code == 0 and json.loads(result.output)["accomplished_rate"] == 1.0, result.output
    inputs = TypeAdapter(AgentInput)
    seen = [inputs.validate_json(line) for line in log.read_text().splitlines()]
    assert [type(m).__name__ for m in seen[:2]] == ["EpisodeStart", "ObservationMessage"]
    assert sum(isinstance(m, EpisodeStart) for m in seen) == 2 and seen[-1].type == "episode_end"
    assert "gold" not in log.read_text() and "hidden_instruction" not in log.read_text()
    schema = json.loads((REPO / "contracts" / "schemas" / "agent_input.schema.json").read_text())
    assert schema == inputs.json_schema()
    actions = TypeAdapter(Action)
    assert all(actions.validate_python(a) for a in actions_of(tmp_path / "t.jsonl"))


@pytest.mark.parametrize(
    "script, expected",
    [
        (
            "import sys; sys.stderr.write('model weights not found\\n'); sys.exit(3)",
            "exited with code 3; stderr: model weights not found",
        ),
        ("import sys, time\nfor line in sys.stdin: time.sleep(30)", "sent no action within 0.5 s (--turn-timeout)"),
    ],
)
def test_a_crashed_or_silent_process_is_an_agent_error_never_a_hang(real_artifacts, tmp_path, script, expected):
    agent = tmp_path / "agent.py"
    agent.write_text(script)
    out = tmp_path / "t.jsonl"
    started = time.monotonic()
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--limit",
        "2",
        "--turn-timeout",
        "0.5",
        "--agent-cmd",
        f"{PYTHON} {shlex.quote(str(agent))}",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 20
    turns = [json.loads(line) for line in out.read_text().splitlines()[1:] if json.loads(line)["type"] == "turn"]
    assert len(turns) == 2 and all(
        t["issues"] == ["agent_error"] for t in turns
    )  # one turn each: the episode ends there
    assert all(expected in t["raw"]["agent_error"] for t in turns), turns[0]["raw"]
    assert json.loads(result.output)["issues"]["agent_error"] == 2


def test_an_agent_writing_garbage_is_a_parse_error_and_plays_on(real_artifacts, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import sys\nfor line in sys.stdin:\n    if '\"observation\"' in line: print('not json', flush=True)\n"
    )
    out = tmp_path / "t.jsonl"
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--limit",
        "1",
        "--agent-cmd",
        f"{PYTHON} {shlex.quote(str(agent))}",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    turns = [json.loads(line) for line in out.read_text().splitlines()[1:] if json.loads(line)["type"] == "turn"]
    assert len(turns) > 1 and all(
        t["issues"] == ["parse_error"] and t["raw"] == {"unparsed": "not json"} for t in turns
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--agent", "no_such_module_xyz:make"], "cannot import 'no_such_module_xyz'"),
        (["--agent", "examples.agents.replay:Nope"], "has no callable 'Nope'"),
        (["--agent", "examples.agents.replay:ReplayAgent"], "does not take the options given"),
        (["--agent", "examples.agents.replay:ReplayAgent", "--agent-option", "trace"], "write it as KEY=VALUE"),
        (["--agent", "oracle", "--agent-cmd", "x"], "exactly one of --agent NAME and --agent-cmd CMD"),
        (["--agent-cmd", "/no/such/agent/binary"], "cannot start it"),
        (["--agent-cmd", "python3 'unbalanced"], "cannot split it into words"),
        (
            ["--agent", "examples.agents.replay:ReplayAgent", "--agent-option", "trace=/no/such/trace.jsonl"],
            "ReplayAgent() failed: FileNotFoundError",
        ),
    ],
)
def test_plugin_mistakes_are_one_line_errors(real_artifacts, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(REPO)
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--limit",
        "1",
        *args,
        "--out",
        str(tmp_path / "t.jsonl"),
    )
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_gym_api_plays_the_gold_path(real_artifacts):
    with TelemetryEnv("xai4heat", "test", root=REPO, artifacts=real_artifacts) as env:
        with pytest.raises(GymError):
            env.step({"kind": "plan", "text": "too early"})
        for episode_id in env.episode_ids[:5]:
            observation, info = env.reset(options={"episode_id": episode_id})
            assert (
                observation.turn == 0 and observation.messages[0].role == "user" and observation.answer_form is not None
            )
            assert (
                info["episode_id"] == episode_id and info["start"].tools and env.start_info().episode_id == episode_id
            )
            rewards = []
            for action in gold_actions(env.episodes[episode_id]):
                observation, reward, terminated, truncated, info = env.step(action)
                rewards.append(reward)
                if terminated or truncated:
                    break
            assert terminated and not truncated and rewards[-1] == 1.0 and set(rewards[:-1]) <= {0.0}
            assert info["score"]["accomplished"] and info["rejections"] == [] and env.end().stopped
            with pytest.raises(GymError):
                env.step({"kind": "plan", "text": "after the end"})
        observation, _ = env.reset(env.episode_ids[0])
        observation, reward, terminated, truncated, info = env.step({"kind": "answer", "fields": {}})
        assert not (terminated or truncated) and reward == 0.0 and observation.messages[-1].role == "user"
        assert "score" not in info and not env.score().accomplished
        with pytest.raises(GymError):
            env.reset("nope")


def test_gym_api_truncates_at_the_turn_budget_and_plays_a_release_alone(real_artifacts, tmp_path):
    release = tmp_path / "release"
    shutil.copytree(real_artifacts / "xai4heat" / "release", release)
    with TelemetryEnv(release=release, split="test", cache_dir=tmp_path / "cache") as env:
        env.reset()
        terminated = truncated = False
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = env.step({"kind": "plan", "text": "thinking"})
        assert truncated and not terminated and reward == 0.0 and not info["score"]["accomplished"]
        assert env.reset()[1]["episode_id"] == env.episode_ids[1]  # no id: the split's next episode
    with pytest.raises(GymError, match="not other"):
        TelemetryEnv("other", release=release)


def test_gymnasium_makes_the_env(real_artifacts, tmp_path):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    release = tmp_path / "release"
    shutil.copytree(real_artifacts / "xai4heat" / "release", release)
    env = gymnasium.make(register(), release=str(release), split="dev", cache_dir=str(tmp_path / "cache"))
    try:
        check_env(env.unwrapped, skip_render_check=True)  # issue 54: it had no spaces, and seed did nothing
        observation, info = env.reset(seed=3)
        assert observation.turn == 0 and info["episode_id"] in env.unwrapped.episode_ids
        assert observation in env.observation_space and env.action_space.sample() in env.action_space
        assert {"kind": "fly"} not in env.action_space and {"kind": "plan", "text": "x"} in env.action_space
        assert len(env.step({"kind": "plan", "text": "x"})) == 5
        # the seed picks the play order: the same seed, the same episodes in the same order; another seed, another
        seven = [env.reset(seed=7)[1]["episode_id"], *(env.reset()[1]["episode_id"] for _ in range(4))]
        again = [env.reset(seed=7)[1]["episode_id"], *(env.reset()[1]["episode_id"] for _ in range(4))]
        eight = [env.reset(seed=8)[1]["episode_id"], *(env.reset()[1]["episode_id"] for _ in range(4))]
        assert seven == again and seven != eight and len(set(seven)) == 5
        assert env.reset(seed=7)[0] == env.reset(seed=7)[0]
    finally:
        env.close()


def test_gym_step_refuses_an_action_of_no_known_kind(real_artifacts, tmp_path):
    with TelemetryEnv(release=real_artifacts / "xai4heat" / "release", cache_dir=tmp_path / "cache") as env:
        env.reset()
        for action in ({"kind": "fly"}, {"text": "no kind"}, "answer", [{"kind": "plan", "text": "x"}, {"kind": 3}]):
            with pytest.raises(GymError, match="ask_user, call_tool, answer, plan; got "):
                env.step(action)
        assert env.turns == [] and env.step({"kind": "plan", "text": "x"})[-1]["turn"] == 0  # no turn was used


def test_an_agent_cannot_fake_a_failure_to_leave_its_episodes_unscored(real_artifacts, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, sys\nfor line in sys.stdin:\n"
        "    if '\"observation\"' in line: print(json.dumps({'infra_error': 'not me'}), flush=True)\n"
    )
    out = tmp_path / "t.jsonl"
    result = run_cli(
        real_artifacts,
        "run",
        "--corpus",
        "xai4heat",
        "--split",
        "test",
        "--limit",
        "1",
        "--agent-cmd",
        f"{PYTHON} {shlex.quote(str(agent))}",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output  # no infra error: its own output, a parse error, scored
    summary = json.loads(result.output)
    assert summary["infra_errors"] == 0 and summary["runs"] == 1 and summary["issues"].get("parse_error") == 1
    assert "infra_error" not in summary["issues"]
    turns = [json.loads(line) for line in out.read_text().splitlines()[1:] if json.loads(line)["type"] == "turn"]
    assert len(turns) > 1 and all(t["issues"] == ["parse_error"] for t in turns)


def test_gym_api_records_hostile_actions_as_parse_errors(real_artifacts):
    # issue 53: 100,000 levels took 86 s and 6.7 GB before a MemoryError (the Unicode check named every level's path);
    # an object JSON cannot write crashed the record (an unknown kind raises: test_gym_step_refuses_...)
    deep: dict = {}
    level = deep
    for _ in range(100_000):
        level["a"] = level = {}
    actions = {
        "nested deeper than 64 levels": {"kind": "call_tool", "name": "list_points", "arguments": deep},
        "not JSON": {"kind": "answer", "fields": {"x": object()}},
        "": {"kind": "call_tool", "name": 7},
    }
    with TelemetryEnv("xai4heat", "test", root=REPO, artifacts=real_artifacts) as env:
        env.reset()
        for says, action in actions.items():
            observation, reward, *_, info = env.step(action)
            assert info["issues"] == ["parse_error"] and reward == 0.0
            assert says in (env.turns[-1].raw or {}).get("error", "") if says else env.turns[-1].action is None
            assert observation.messages[-1].text == "(your last output was not a valid action)"
        assert all(canonical_bytes(t.model_dump(mode="json")) for t in env.turns)  # every record can be written
