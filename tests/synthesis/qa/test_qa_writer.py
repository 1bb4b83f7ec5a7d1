"""`synth RECIPE --writer openai`: an OpenAI-compatible chat server on loopback (a scripted "model" that reads the
prompt) rewrites each question; every check drops what it should, by reason, and the key never leaks."""

import contextlib
import io
import json
import re

import pytest
from loopback import SECRET, LoopbackServer, Reply

from jaxseeker.cli import main
from jaxseeker.errors import InputError
from jaxseeker.synthesis.qa import e2hqa, read_jsonl
from jaxseeker.synthesis.qa.record import QARecord
from jaxseeker.synthesis.qa.writer import DEFAULT_PROMPT, LLMWriter, facts, read_prompt
from jaxseeker.tools import LLMClient, LLMConfig
from jaxseeker.world import DateIn, Edge, Entity, Is, LabelIs, NumberIn, Query, Relation, Var, World

WORLD = "synthetic:300:5"


class Script:
    """The scripted model. Writing: `Put simply: ` and the reference phrasing; the check: nothing missing.
    `mode` breaks one step on purpose; `reveal` is a name the `reveal` mode adds to the question."""

    def __init__(self, mode: str = "good", reveal: str = ""):
        self.mode, self.reveal = mode, reveal

    def __call__(self, request) -> Reply:
        if self.mode == "http500":
            return Reply(500, "overloaded")
        prompt = request.json()["messages"][-1]["content"]
        text = self.write(prompt) if prompt.startswith("You write questions") else self.check(prompt)
        message = {"role": "assistant", "content": text}
        return Reply(body={"model": "scripted", "choices": [{"message": message, "finish_reason": "stop"}]})

    def write(self, prompt: str) -> str:
        draft = re.search(r"^A correct but plain phrasing, for reference: (.*)$", prompt, re.MULTILINE).group(1)
        answer = re.search(r"never write the answer \((.*)\)\.$", prompt, re.MULTILINE).group(1)
        names = re.search(r"^- Keep these names exactly as written: (.*)$", prompt, re.MULTILINE).group(1)
        question = f"Put simply: {draft}"
        if self.mode == "leak":
            question += f" (It is {answer}.)"
        elif self.mode == "placeholder":
            question += " Call that entity X for short."
        elif self.mode == "drop_name":
            question = question.replace(names.split("; ")[0], "a place")
        elif self.mode == "reveal":
            question += f" It has to do with {self.reveal}."
        elif self.mode == "unparsable":
            return "I would rather not."
        return f"<think>Rephrase.</think>{json.dumps({'question': question})}"

    def check(self, prompt: str) -> str:
        if self.mode == "check_garbled":
            return "Looks fine to me."
        return json.dumps({"missing": [1] if self.mode == "clue_missing" else []})


@pytest.fixture
def server():
    s = LoopbackServer()
    yield s
    s.close()


def writer_for(server, world, mode="good", reveal="", solver=None) -> LLMWriter:
    server.route = Script(mode, reveal)
    client = LLMClient(
        LLMConfig(
            base_url=f"{server.url}/v1",
            model="scripted",
            api_key_env="JAXSEEKER_TEST_NO_KEY",
            max_retries=0,
            backoff_s=0.0,
        )
    )
    return LLMWriter(client, world, "e2hqa", solver=solver)


@pytest.fixture(scope="module")
def rule_records(world):
    """Three E2HQA records of the rule-based realiser (each names an entity)."""
    return e2hqa.synthesize(world, 3, seed=2).records


def test_a_written_question_replaces_the_rule_text_after_two_calls(server, world, rule_records):
    writer = writer_for(server, world)
    for r in rule_records:
        written, why = writer(r)
        assert why == "kept" and written.question == f"Put simply: {r.question}"
        assert written.meta["rule_question"] == r.question and written.meta["writer"] == "scripted"
        assert written.answer == r.answer and written.meta["query"] == r.meta["query"]
    assert len(server.requests) == 2 * len(rule_records)  # one write and one back-check each
    write, check = (r.json()["messages"][0]["content"] for r in server.requests[:2])
    first = rule_records[0]
    lines, names = facts(world, Query.from_json(first.meta["query"]))
    assert all(f"{k}. {line}" in write for k, line in enumerate(lines, 1)) and first.question in write
    assert all(n in write for n in names) and f"never write the answer ({first.answer})" in write
    assert "Style: as in WebDancer's E2HQA" in write
    assert check.startswith("You check a question") and "Put simply: " in check and lines[0] in check


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("leak", "leak"),
        ("placeholder", "placeholder"),
        ("drop_name", "name_missing"),
        ("unparsable", "unparsable"),
        ("clue_missing", "clue_missing"),
        ("check_garbled", "check_unparsable"),
        ("http500", "llm_error"),
    ],
)
def test_each_check_drops_its_question(server, world, rule_records, mode, reason):
    writer = writer_for(server, world, mode)
    assert [writer(r) for r in rule_records] == [(None, reason)] * len(rule_records)


def test_the_same_written_question_twice_is_a_duplicate(server, world, rule_records):
    writer = writer_for(server, world)
    assert writer(rule_records[0])[1] == "kept" and writer(rule_records[0]) == (None, "duplicate")


def test_a_question_that_gives_the_solver_what_the_query_hides_is_dropped(server, world):
    """A work two links from the only name, where the reference solver's search for the rule text does not reach the
    person in between; a rewrite that names that person lets it reach the work: the answer changed."""
    from jaxseeker.synthesis.qa import reference_solver
    from jaxseeker.synthesis.qa.solvers import SolverTask

    solver = reference_solver(world)
    for city in world.ids_of_type("city"):
        chain = [(w, p) for p in world.sources(city, "born_in") for w in world.sources(p, "created_by")]
        if len(chain) != 1:
            continue
        ((work, person),) = chain
        q = Query(
            (Var("work"), Var("person"), Var("city", (Is(city),))), (Edge(0, "created_by", 1), Edge(1, "born_in", 2))
        )
        record = QARecord(
            f"Which work is by someone born in {world.entity(city).name}?",
            world.entity(work).name,
            "t",
            2,
            {"query": q.to_json(), "answer_id": work},
        )
        if solver(SolverTask(record.question, q)) == "":
            break
    assert writer_for(server, world, "good", solver=solver)(record)[1] == "kept"
    revealing = writer_for(server, world, "reveal", world.entity(person).name, solver=solver)
    assert revealing(record) == (None, "solver_changed")


def test_facts_say_the_query_in_the_schema_words():
    w = World(
        [
            Entity("p", "person", "Ada Fenwick", dates={"born": "1962-03-03"}, labels={"occupation": "poet"}),
            Entity("c", "city", "Varo", numbers={"population": 1_540_000}),
        ],
        [Relation("p", "born_in", "c")],
    )
    q = Query(
        (
            Var("city", (NumberIn("population", 1e6, 1e7, "magnitude"),)),
            Var("person", (LabelIs("occupation", "poet"), DateIn("born", "1960-01-01", "1969-12-31", "decade"))),
        ),
        (Edge(1, "born_in", 0),),
    )
    assert facts(w, q) == (
        [
            "[answer] is a city",
            "[answer] has a population of millions",
            "[B] is a poet",
            "[B] was born in the 1960s",
            "[B] was born in [answer]",
            "the question asks which entity [answer] is",
        ],
        [],
    )
    named = Query((Var("person", (Is("p"),)),), answer_attr="born")
    assert facts(w, named) == (["the question asks: In what year was Ada Fenwick born?"], ["Ada Fenwick"])


def test_the_prompt_file_is_checked_and_its_styles_read(tmp_path):
    prompt = read_prompt(DEFAULT_PROMPT)
    assert prompt.style("sailorfog").startswith("fuzzy and multi-clue") and prompt.style("nope").startswith("natural")
    text = DEFAULT_PROMPT.read_text()
    (tmp_path / "no_check.md").write_text(text.split("\n## check")[0] + "\n## styles\n- default: plain\n")
    with pytest.raises(InputError, match=r"no_check.md: no `## check` section"):
        read_prompt(tmp_path / "no_check.md")
    docs, write = text.split("\n## write", 1)
    (tmp_path / "no_facts.md").write_text(docs + "\n## write" + write.replace("$facts", "the facts", 1))
    with pytest.raises(InputError, match=r"no_facts.md: `## write` lacks \$facts"):
        read_prompt(tmp_path / "no_facts.md")


def test_the_command_writes_checked_questions_counts_drops_and_never_the_key(server, tmp_path):
    server.route = Script()
    out = tmp_path / "q.jsonl"
    argv = [
        "synth",
        "e2hqa",
        "--writer",
        "openai",
        "--llm-url",
        f"{server.url}/v1",
        "--llm-model",
        "scripted",
        "--world",
        WORLD,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--n",
        "3",
        "--no-solver",
        "--out",
        str(out),
    ]
    with (
        pytest.MonkeyPatch.context() as env,
        contextlib.redirect_stdout(io.StringIO()) as stdout,
        contextlib.redirect_stderr(io.StringIO()) as stderr,
    ):
        env.setenv("OPENAI_API_KEY", SECRET)
        assert main(argv) == 0
    output = stdout.getvalue() + stderr.getvalue()
    records = list(read_jsonl(out))
    assert len(records) == 3 and all(r.question.startswith("Put simply: ") for r in records)
    assert all(r.meta["writer"] == "scripted" and r.meta["rule_question"] for r in records)
    assert "3 questions (e2hqa: 3)" in output and "distinct two-word openings: 1" in output
    assert server.requests and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in output and SECRET not in out.read_text()


def test_writer_flags_fail_in_one_line(tmp_path):
    common = ["synth", "e2hqa", "--n", "1", "--out", str(tmp_path / "q.jsonl"), "--cache-dir", str(tmp_path / "c")]
    with pytest.raises(SystemExit, match="^jaxseeker synth: --writer openai needs --llm-model"):
        main([*common, "--writer", "openai"])
    (tmp_path / "bad.md").write_text("## write\nno placeholders\n")
    with pytest.raises(SystemExit, match=r"bad.md: `## write` lacks \$facts, \$names, \$draft, \$answer, \$style$"):
        main(
            [
                *common,
                "--writer",
                "openai",
                "--llm-url",
                "http://127.0.0.1:9/v1",
                "--llm-model",
                "m",
                "--writer-prompt",
                str(tmp_path / "bad.md"),
            ]
        )
