"""The roofline of a generation workload, counted by hand on the tiny model."""

from jaxseeker.generation.roofline import Workload, best, generate_workload
from jaxseeker.model.flops import active_params

from .reference import CFG


def test_the_workload_of_two_groups_of_rows_counts_each_prompt_once_and_each_rows_own_context():
    """4 rows (2 distinct prompts of 5 tokens) + 3 tokens: each prompt prefills its first 4 tokens without logits,
    attending 1+2+3+4 keys; each row decodes 3 steps over contexts 5, 6, 7 and reads every weight once a step."""
    work = generate_workload(CFG, rows=4, prompt_len=5, new_tokens=3, distinct_prompts=2)
    weights, attend = active_params(CFG), 4 * CFG.num_layers * CFG.num_heads * CFG.head_dim
    logits = 2 * CFG.hidden_size * CFG.vocab_size
    assert work.prefill_flops == 2 * (4 * (2 * weights - logits) + attend * 10)
    assert work.decode_flops == 4 * (3 * 2 * weights + attend * 18)
    assert work.weight_bytes == 3 * weights * 4
    assert work.kv_bytes == 4 * 18 * 2 * CFG.num_layers * CFG.num_kv_heads * CFG.head_dim * 4


def test_the_roofline_adds_flops_at_the_ceiling_and_bytes_at_the_bandwidth():
    assert Workload(3e9, 1e9, 2e9, 4e9).seconds(2e9, 3e9) == 2.0 + 2.0


def test_the_ceilings_are_the_best_of_their_measures():
    # a measure taken under load reads low on one ceiling or both: each ceiling is its own best
    assert best((200e9, 20e9), (150e9, 30e9), (190e9, 10e9)) == (200e9, 30e9)
