"""Solvers: the embedded rule solver (closed book, evidence, search), prompt solvers, and an OpenAI-style client
over a real loopback HTTP server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from jaxseeker.synthesis.qa import PromptSolver, RuleSolver, SolverTask, chat_completion
from jaxseeker.world import Edge, Is, Query, Var


def born_in_question(world):
    person = next(p for p in world.ids_of_type("person") if world.targets(p, "born_in") and world.degree(p) <= 3)
    (city,) = world.targets(person, "born_in")
    q = Query((Var("city"), Var("person", (Is(person),))), (Edge(1, "born_in", 0),))
    return f"Which city is the birthplace of {world.entity(person).name}?", q, person, city


def test_rule_solver_reads_only_what_it_is_given(world):
    text, q, person, city = born_in_question(world)
    name = world.entity(city).name
    assert RuleSolver(world)(SolverTask(text, q)) == ""  # a rare person is not in closed-book memory
    assert RuleSolver(world)(SolverTask(text, q, evidence=(person, city))) == name
    assert RuleSolver(world)(SolverTask(text, q, evidence=(person,))) == ""
    assert RuleSolver(world, memory_share=1.0)(SolverTask(text, q)) == name
    assert RuleSolver(world, search_k=3, hops=1)(SolverTask(text, q)) == name  # search finds the person's page
    assert RuleSolver(world)(SolverTask(text, None)) == ""


def test_prompt_solver_builds_the_prompt_and_reads_the_answer_line(world):
    text, q, person, city = born_in_question(world)
    prompts = []

    def complete(prompt):
        prompts.append(prompt)
        return "Let me think.\nAnswer: Somewhere\n"

    solver = PromptSolver(complete, world)
    assert solver(SolverTask(text, q, evidence=(person, city))) == "Somewhere"
    assert world.page(world.url(person)).text[:100] in prompts[0] and text in prompts[0]
    solver(SolverTask(text, q))
    assert prompts[1].startswith("Answer from memory") and "##" not in prompts[1]


class _Chat(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen.append((self.path, self.headers.get("Authorization"), body))
        reply = {"choices": [{"message": {"role": "assistant", "content": "Answer: Varo"}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    server = HTTPServer(("127.0.0.1", 0), _Chat)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_chat_completion_over_loopback(world, chat_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "k-123")
    url = f"http://127.0.0.1:{chat_server.server_address[1]}/v1"
    solver = PromptSolver(chat_completion(url, "tiny"), world)
    assert solver(SolverTask("Which city?")) == "Varo"
    path, auth, body = chat_server.seen[0]
    assert path == "/v1/chat/completions" and auth == "Bearer k-123"
    assert body["model"] == "tiny" and "Which city?" in body["messages"][0]["content"]
