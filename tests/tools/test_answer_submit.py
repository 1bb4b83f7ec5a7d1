"""`answer_submit`: the episode's feedback function reads each submitted answer."""

from jaxseeker.tools import ToolRegistry, answer_submit_tool


def test_each_submission_gets_the_feedback_text():
    submitted = []

    def feedback(answer):
        submitted.append(answer)
        return f"token F1 = {1.0 if answer == 'Ida Konst' else 0.0:.2f}; {3 - len(submitted)} submissions left"

    registry = ToolRegistry([answer_submit_tool(feedback)])
    assert registry.call("answer_submit", {"answer": " Konst "}).text == "token F1 = 0.00; 2 submissions left"
    assert registry.call("answer_submit", {"answer": "Ida Konst"}).text == "token F1 = 1.00; 1 submissions left"
    assert registry.call("answer_submit", {"answer": "  "}).error == "the answer is empty"
    assert submitted == ["Konst", "Ida Konst"]
