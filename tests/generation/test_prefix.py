"""Which held prompt a new one copies its leading tokens from, and how many."""

from jaxseeker.generation.prefix import common_prefix, pick_donor, pick_kept

SYSTEM = list(range(100, 120))  # 20 tokens every prompt opens with


def test_common_prefix_counts_the_leading_tokens_two_prompts_share():
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([5], [6]) == 0


def test_the_prompt_sharing_the_most_is_picked_and_its_last_token_is_never_copied():
    held = [(SYSTEM + [1, 2], 21), (SYSTEM + [7, 8, 9], 22)]  # both written
    assert pick_donor(SYSTEM + [7, 8, 5], held, least=16, chunk=8) == (1, 22)
    assert pick_donor(SYSTEM + [7, 8, 9], held, least=16, chunk=8) == (1, 22)  # the same prompt: all but its last
    assert pick_donor(SYSTEM[:10] + [0] * 20, held, least=16, chunk=8) is None  # 10 shared tokens, under 16
    assert pick_donor(SYSTEM + [1], held, least=0, chunk=8) is None  # sharing off


def test_unwritten_tokens_are_waited_for_only_where_that_spares_a_prefill_chunk():
    group = SYSTEM + [1, 2, 3]
    queued = [(group, 0)]  # the donor's prompt is not prefilled yet
    assert pick_donor(group, queued, least=16, chunk=8) == (0, 22)  # a group's rollout: 0 chunks left instead of 3
    assert pick_donor(SYSTEM + [4, 5], queued, least=16, chunk=64) is None  # 1 chunk either way: no wait
    assert pick_donor(SYSTEM + [4, 5], [(group, 22)], least=16, chunk=64) == (0, 20)  # written: shared anyway


def test_the_kept_prefix_sharing_the_most_is_picked_up_to_the_prompts_last_token():
    kept = {3: tuple(SYSTEM + [1, 2, 3, 4]), 7: tuple(SYSTEM + [1, 9])}
    assert pick_kept(SYSTEM + [1, 2, 3, 4, 5], kept, least=16) == (3, 24)  # a conversation resent with a new turn
    assert pick_kept(SYSTEM + [1, 9], kept, least=16) == (7, 21)  # all but its last token
    assert pick_kept(SYSTEM[:10], kept, least=16) is None  # under 16 shared
    assert pick_kept(SYSTEM + [1], kept, least=0) is None  # sharing off
