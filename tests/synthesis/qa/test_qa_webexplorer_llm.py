"""`synth webexplorer --explorer openai`: an OpenAI-compatible chat server on loopback (a scripted "model" that
reads the conversation) explores a synthetic world through the real rollout loop and tools, writes a question,
evolves it; each check drops what it should, and the rule explorer is untouched."""

import contextlib
import io
import json
import re
import threading

import pytest
from cli_support import usage_error
from loopback import SECRET, LoopbackServer, Reply

from jaxseeker.cli import main
from jaxseeker.synthesis.command import default_tokenizer
from jaxseeker.synthesis.qa import read_jsonl, webexplorer, write_jsonl
from jaxseeker.synthesis.qa.checks import normalize
from jaxseeker.synthesis.qa.webexplorer_llm import (
    EVOLVE_PROMPT,
    ExplorerConfig,
    explorer_level,
    on_page,
    synthesize,
)
from jaxseeker.tools import LLMClient, LLMConfig
from jaxseeker.world import open_world

WORLD = "synthetic:300:5"
UNKNOWN = "Quorvath Zindlemoor"  # on no page of the world


def call(name: str, arguments: dict) -> str:
    """An assistant turn with one tool call."""
    action = json.dumps({"name": name, "arguments": arguments})
    return f"<think>Next: {name}.</think>\n<tool_call>\n{action}\n</tool_call>"


class Script:
    """The scripted model: search the seed, open its page, follow first links to 3 pages in all, ask about the last
    page's entity; evolve by blurring twice, then repeat itself. `mode` breaks one step on purpose."""

    def __init__(self, mode: str = "good"):
        self.mode = mode
        self.visited: set[str] = set()
        self.failing: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request) -> Reply:
        messages = request.json()["messages"]
        if messages[0]["content"] == EVOLVE_PROMPT:
            text = self.evolve(messages[1]["content"])
        else:
            seed = re.search(r"Seed entity: (.+)", messages[1]["content"]).group(1)
            with self.lock:
                self.failing += [seed] if self.mode == "http500" and not self.failing else []
            if seed in self.failing:
                return Reply(500, "overloaded")
            text = self.explore(messages, seed)
        message = {"role": "assistant", "content": text}
        return Reply(body={"model": "scripted", "choices": [{"message": message, "finish_reason": "stop"}]})

    def explore(self, messages: list[dict], seed: str) -> str:
        turns = sum(m["role"] == "assistant" for m in messages)
        last = messages[-1]["content"]
        opened = re.findall(r"^URL: (\S+)", "\n".join(m["content"] for m in messages[3::2]), re.MULTILINE)
        if turns == 0:
            return call("search", {"query": [seed]})
        if turns == 1:
            hits = re.findall(r"^\[\d+\] (.*)\n(\S+)", last, re.MULTILINE)
            url = next((u for t, u in hits if t == seed), hits[0][1])
        elif len(opened) < (1 if self.mode == "few_pages" else 3):
            url = next(u for _, u in re.findall(r"^- (.*): (\S+)$", last, re.MULTILINE) if u not in opened)
        else:
            return self.final(last, seed)
        with self.lock:
            self.visited.add(url)
        return call("visit", {"url": url, "goal": "facts"})

    def final(self, page: str, seed: str) -> str:
        title = re.search(r"^Page: (.*)$", page, re.MULTILINE).group(1)
        answer = re.findall(r"^- (.*): \S+$", page, re.MULTILINE)[0] if self.mode == "few_pages" else title
        kind = re.search(rf"{re.escape(answer)} is an? (\w+)", page)
        question = f"Which {kind.group(1) if kind else 'entity'} is two links away from {seed}?"
        if self.mode == "leak":
            question = f"Which entity, {answer}, is two links away from {seed}?"
        if self.mode == "ungrounded":
            answer = UNKNOWN
        if self.mode == "long_answer":
            answer = f"the {kind.group(1) if kind else 'entity'} that is known to the world as {answer}"
        if self.mode == "duplicate":
            question = "Which entity is two links away from where this search started?"
        if self.mode == "unparsable":
            return f"<think>Done.</think>\n<answer>It is {answer}.</answer>"
        return f"<think>Done.</think>\n<answer>{json.dumps({'question': question, 'answer': answer})}</answer>"

    def evolve(self, prompt: str) -> str:
        question, answer = re.fullmatch(r"Question: (.*)\nAnswer: (.*)", prompt, re.DOTALL).groups()
        if self.mode == "no_evolution":
            return "Sorry, I cannot make it harder."
        blurred = question.count("vaguely")
        if blurred == 1 and self.mode == "evolve_leak":
            return json.dumps({"question": f"{question} (it is {answer})", "edit": "remove"})
        new = question if blurred >= 2 else f"{question.removesuffix('?')}, vaguely?"
        return f"<think>Blur it.</think>\n{json.dumps({'question': new, 'edit': 'blur'})}"


@pytest.fixture
def server():
    s = LoopbackServer()
    yield s
    s.close()


@pytest.fixture(scope="module")
def tokenizer(world):
    return default_tokenizer(world)


def run(server, world, tokenizer, mode: str, n: int, attempts: int):
    script = Script(mode)
    server.route = script
    client = LLMClient(
        LLMConfig(
            base_url=f"{server.url}/v1",
            model="scripted",
            api_key_env="JAXSEEKER_TEST_NO_KEY",
            max_retries=0,
            backoff_s=0.0,
        )
    )
    config = ExplorerConfig(max_attempts=attempts, date="2025-01-01")
    return script, synthesize(world, n, client=client, tokenizer=tokenizer, seed=1, config=config)


def test_an_evolved_question_keeps_its_answer_read_on_a_visited_page(server, world, tokenizer):
    script, result = run(server, world, tokenizer, "good", 2, 2)
    assert len(result.records) == 2 and result.attempts == 2 and not result.dropped
    for r in result.records:
        assert r.meta["evolution"][-1] == r.question and len(r.meta["evolution"]) == 3 and r.meta["rounds"] == 2
        assert r.meta["obfuscations"] == ["blur", "blur"] and r.question.endswith("vaguely, vaguely?")
        assert set(r.meta["urls"]) <= script.visited and len(r.meta["urls"]) == 3
        assert any(normalize(r.answer) in normalize(world.page(u).text) for u in r.meta["answer_urls"])
        assert r.meta["entities"] == [world.entity_at(u).id for u in r.meta["urls"]]
        assert world.url(r.meta["seed"]) == r.meta["urls"][0] and r.level == 3


def test_a_round_that_leaks_the_answer_ends_the_evolution_and_the_last_good_question_is_kept(server, world, tokenizer):
    _, result = run(server, world, tokenizer, "evolve_leak", 2, 2)
    assert len(result.records) == 2
    for r in result.records:
        assert r.meta["rounds"] == 1 and r.question == r.meta["evolution"][1] and r.answer not in r.question


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("leak", "leak"),
        ("ungrounded", "ungrounded"),
        ("unparsable", "unparsable_answer"),
        ("long_answer", "bad_answer"),
        ("few_pages", "few_pages"),
        ("no_evolution", "no_evolution"),
    ],
)
def test_each_check_drops_what_it_should(server, world, tokenizer, mode, reason):
    _, result = run(server, world, tokenizer, mode, 2, 3)
    assert result.records == [] and result.attempts == 3
    assert dict(result.dropped) == {reason: 3}


def test_a_question_already_kept_is_dropped(server, world, tokenizer):
    _, result = run(server, world, tokenizer, "duplicate", 2, 3)
    assert len(result.records) == 1 and dict(result.dropped) == {"duplicate": 2}


def test_levels_follow_the_pages_opened_and_the_rounds(world):
    seed = next(i for i in world.ids_of_type("person") if world.degree(i) >= 3)
    name, far = world.entity(seed).name, world.entity(next(i for i in world.entities if i != seed)).name
    assert not on_page(world, world.url(seed), far) and on_page(world, world.url(seed), name)
    assert explorer_level(world, seed, name, [seed, "x"], 1) == 1  # a fact of the seed's own page
    assert explorer_level(world, seed, name, [seed, "x", "y"], 1) == 2
    assert explorer_level(world, seed, far, [seed, "x"], 5) == 2
    assert explorer_level(world, seed, name, [seed, "x", "y"], 2) == 3


def test_a_seed_whose_chat_requests_fail_is_dropped_and_the_run_goes_on(server, world, tokenizer, capsys):
    script, result = run(server, world, tokenizer, "http500", 2, 3)
    assert len(result.records) == 2 and dict(result.dropped) == {"llm_error": 1}
    assert "HTTP 500" in capsys.readouterr().err
    failed = [r for r in server.requests if f"Seed entity: {script.failing[0]}\n" in r.json()["messages"][1]["content"]]
    assert len(failed) == 1  # no retries (max_retries=0), and the episode's later turns never asked again


def cli(argv: list[str]) -> str:
    """`jaxseeker ARGV` with $OPENAI_API_KEY set: its stdout and stderr."""
    with (
        pytest.MonkeyPatch.context() as env,
        contextlib.redirect_stdout(io.StringIO()) as out,
        contextlib.redirect_stderr(io.StringIO()) as err,
    ):
        env.setenv("OPENAI_API_KEY", SECRET)
        assert main(argv) == 0
    return out.getvalue() + err.getvalue()


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    """`synth webexplorer --explorer openai` once, n=3: (its argv without --out, the out file, its output, the
    requests the server saw, the script)."""
    tmp = tmp_path_factory.mktemp("explorer")
    server, script = LoopbackServer(), Script()
    server.route = script
    argv = [
        "synth",
        "webexplorer",
        "--explorer",
        "openai",
        "--llm-url",
        f"{server.url}/v1",
        "--llm-model",
        "scripted",
        "--world",
        WORLD,
        "--cache-dir",
        str(tmp / "cache"),
        "--n",
        "3",
    ]
    try:
        output = cli([*argv, "--out", str(tmp / "q.jsonl")])
        yield argv, tmp / "q.jsonl", output, server.requests, script
    finally:
        server.close()


def test_the_command_writes_grounded_evolved_questions_and_never_the_key(explored):
    argv, out, output, requests, script = explored
    world = open_world(WORLD, cache_dir=argv[argv.index("--cache-dir") + 1])
    records = list(read_jsonl(out))
    assert len(records) == 3 and len({r.meta["seed"] for r in records}) == 3
    for r in records:
        assert r.tag == "webexplorer" and r.meta["explorer"] == "openai" and r.meta["model"] == "scripted"
        assert r.meta["evolution"][-1] == r.question and r.meta["rounds"] == len(r.meta["evolution"]) - 1 == 2
        assert set(r.meta["urls"]) <= script.visited
        assert any(normalize(r.answer) in normalize(world.page(u).text) for u in r.meta["urls"])
        assert r.meta["entities"] == [world.entity_at(u).id for u in r.meta["urls"]]
    assert "3 questions (webexplorer: 3)" in output and "level: 3: 3" in output
    assert "reference solver" not in output  # it reads structured queries, which these questions do not have
    assert requests and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in requests)
    assert SECRET not in output and SECRET not in out.read_text()


def test_apart_keeps_only_questions_on_entities_the_file_never_uses(explored, tmp_path):
    argv, first, _, _, _ = explored
    output = cli([*argv, "--apart", str(first), "--out", str(tmp_path / "fresh.jsonl")])
    world = open_world(WORLD, cache_dir=argv[argv.index("--cache-dir") + 1])
    hubs = set(world.ids_of_type("country"))
    used = {e for r in read_jsonl(first) for e in r.meta["entities"]} - hubs
    records = list(read_jsonl(tmp_path / "fresh.jsonl"))
    assert len(records) == 3 and not any(set(r.meta["entities"]) & used for r in records)
    assert "dropped: shares an evidence entity" in output  # the same seed explores the same first seeds again


def test_the_llm_explorer_needs_a_server_and_only_webexplorer_has_one(tmp_path, capsys):
    with pytest.raises(SystemExit, match=r"^jaxseeker synth: --explorer openai needs --llm-model"):
        main(["synth", "webexplorer", "--explorer", "openai", "--out", str(tmp_path / "q.jsonl")])
    assert not (tmp_path / "q.jsonl").exists()
    err = usage_error(["synth", "sailorfog", "--explorer", "openai", "--out", "q.jsonl"], capsys)
    assert err == "jaxseeker synth sailorfog: error: unrecognized arguments: --explorer openai"
    err = usage_error(["synth", "e2hqa", "--evolve-rounds", "2", "--out", "q.jsonl"], capsys)
    assert err == ("jaxseeker synth e2hqa: error: unrecognized arguments: --evolve-rounds 2 (did you mean '--rounds'?)")
    err = usage_error(["synth", "webexplorer", "--evolve-rounds", "0", "--out", "q.jsonl"], capsys)
    assert err == "jaxseeker synth webexplorer: error: argument --evolve-rounds: must be an integer >= 1, got 0"


def test_the_rule_explorer_writes_what_it_wrote_before(tmp_path):
    common = [
        "synth",
        "webexplorer",
        "--world",
        WORLD,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--n",
        "6",
        "--seed",
        "2",
        "--no-solver",
    ]
    cli([*common, "--out", str(tmp_path / "cli.jsonl")])
    world = open_world(WORLD, cache_dir=tmp_path / "cache")
    write_jsonl(webexplorer.synthesize(world, 6, seed=2).records, tmp_path / "direct.jsonl")
    assert (tmp_path / "cli.jsonl").read_bytes() == (tmp_path / "direct.jsonl").read_bytes()
    cli([*common, "--evolve-rounds", "1", "--out", str(tmp_path / "one.jsonl")])
    assert {r.meta["rounds"] for r in read_jsonl(tmp_path / "one.jsonl")} == {1}
