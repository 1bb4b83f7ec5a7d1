import pytest

from jaxseeker.rewards import EpisodeOutcome, get_reward_fn, length_penalty, overlong_penalty


def test_webdancer_and_websailor_discount_right_answers_by_format():
    for name in ("webdancer", "websailor"):
        reward = get_reward_fn(name)
        assert reward(EpisodeOutcome(format_ok=True, correct=True)) == pytest.approx(1.0)
        assert reward(EpisodeOutcome(format_ok=True, correct=False)) == 0.0
        assert reward(EpisodeOutcome(format_ok=False, correct=False)) == 0.0
        assert reward(EpisodeOutcome(format_ok=False, correct=True)) == pytest.approx(0.9)
        assert reward(EpisodeOutcome(format_ok=False, correct=0.5)) == pytest.approx(0.45)


def test_webexplorer_discounts_a_right_answer_by_its_format_weight():
    reward = get_reward_fn("webexplorer")
    assert reward(EpisodeOutcome(format_ok=True, correct=True)) == pytest.approx(1.0)
    assert reward(EpisodeOutcome(format_ok=False, correct=True)) == pytest.approx(0.8)
    assert reward(EpisodeOutcome(format_ok=True, correct=False)) == 0.0
    assert reward(EpisodeOutcome(format_ok=False, correct=True), format_weight=0.5) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="format_weight must lie in"):
        reward(EpisodeOutcome(format_ok=True, correct=True), format_weight=1.5)


def test_dapo_overlong_penalty_is_flat_then_linear_then_the_whole_penalty():
    """DAPO eq. 13 with L_max = 20480, L_cache = 4096: ((L_max - L_cache) - |y|) / L_cache inside the buffer."""
    assert overlong_penalty(16384, max_tokens=20480, buffer=4096) == 0.0
    assert overlong_penalty(17408, max_tokens=20480, buffer=4096) == pytest.approx((16384 - 17408) / 4096)
    assert overlong_penalty(20480, max_tokens=20480, buffer=4096) == pytest.approx(-1.0)
    assert overlong_penalty(30000, max_tokens=20480, buffer=4096, penalty=0.5) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="need 0 < buffer < max_tokens"):
        overlong_penalty(10, max_tokens=100, buffer=100)
    with pytest.raises(ValueError, match=r"penalty must lie in \[0, 1\]"):
        overlong_penalty(10, max_tokens=100, buffer=10, penalty=-1.0)


def test_length_penalty_is_flat_then_linear_then_minus_one():
    assert length_penalty(500, l_expect=1000, l_max=3000) == 0.0
    assert length_penalty(1000, l_expect=1000, l_max=3000) == 0.0
    assert length_penalty(1500, l_expect=1000, l_max=3000) == pytest.approx(-0.25)
    assert length_penalty(3000, l_expect=1000, l_max=3000) == pytest.approx(-1.0)
    assert length_penalty(3001, l_expect=1000, l_max=3000) == -1.0
    with pytest.raises(ValueError, match="0 < l_expect < l_max"):
        length_penalty(10, l_expect=3000, l_max=1000)


def test_webseer_discounts_f1_by_submissions():
    reward = get_reward_fn("webseer")
    hyper = {"l_expect": 1000, "l_max": 3000, "alpha": 0.8}
    first_try = EpisodeOutcome(format_ok=True, f1=1.0, n_tokens=800, n_submissions=1)
    assert reward(first_try, **hyper) == pytest.approx(0.8)
    third_try_long = EpisodeOutcome(format_ok=True, f1=0.5, n_tokens=2000, n_submissions=3)
    assert reward(third_try_long, **hyper) == pytest.approx(0.5 * 0.8**3 * (1 - 0.5))
    assert reward(EpisodeOutcome(format_ok=False, f1=1.0, n_tokens=10), **hyper) == 0.0
    assert reward(EpisodeOutcome(format_ok=True, f1=0.0, n_tokens=2500), **hyper) == 0.0


def test_unknown_reward_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="known names: evidence, webdancer, webexplorer, websailor, webseer"):
        get_reward_fn("webwalker")


def test_a_users_reward_is_named_by_module_path(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text("def answer_only(outcome):\n    return float(outcome.correct)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_reward_fn("my_rewards:answer_only")(EpisodeOutcome(format_ok=False, correct=True)) == 1.0
    with pytest.raises(ValueError, match="has no callable 'missing'"):
        get_reward_fn("my_rewards:missing")


def test_evidence_pays_for_the_chain_and_nothing_for_a_broken_format():
    reward = get_reward_fn("evidence")
    assert reward(EpisodeOutcome(format_ok=True, correct=True, evidence=1.0)) == pytest.approx(1.3)
    assert reward(EpisodeOutcome(format_ok=True, correct=False, evidence=0.5)) == pytest.approx(0.15)
    assert reward(EpisodeOutcome(format_ok=True, correct=False)) == 0.0
    assert reward(EpisodeOutcome(format_ok=False, correct=True, evidence=1.0)) == 0.0
    assert reward(EpisodeOutcome(format_ok=True, correct=False, evidence=1.0), evidence_weight=0.5) == 0.5
