"""The host side of the paged KV cache: pages taken as a context grows, shared by reference, freed by the last
holder, each slot on its own part of the pool."""

from jaxseeker.generation.pages import Pages


def test_a_slot_takes_pages_as_its_context_grows_until_its_part_runs_out():
    pages = Pages(slots=2, row_pages=4, pages=5, page=8)
    assert pages.reserve(0, 9) == 16  # 9 positions: two pages
    assert pages.reserve(0, 16) == 16  # already held
    assert pages.reserve(1, 32) == 24  # four wanted, three left
    assert pages.free() == 0 and pages.reserve(0, 30) == 16  # none left: the slot keeps what it has
    assert pages.table[0, :2].tolist() == [0, 1] and pages.table[1, :3].tolist() == [2, 3, 4]
    pages.release(1)
    assert pages.free() == 3 and pages.reserve(0, 30) == 32  # and then grows into the freed pages
    assert pages.reserve(0, 1000) == 32  # never past its row's pages


def test_a_shared_prompt_is_held_once_and_freed_by_its_last_holder():
    """20 positions of slot 0's: two whole pages by reference and a copy of the third, the one the sharer writes on
    into."""
    pages = Pages(slots=3, row_pages=4, pages=8, page=8)
    pages.reserve(0, 24)
    shared, copy = pages.share(1, donor=0, positions=20)
    assert shared == 20 and copy == (0, 2, 3)  # (part, the donor's page, the sharer's own)
    assert pages.table[1, :3].tolist() == [0, 1, 3] and pages.free() == 4
    pages.release(0)
    assert pages.free() == 5  # only the donor's third page: the first two are still the sharer's
    pages.release(1)
    assert pages.free() == 8


def test_with_no_page_free_only_the_whole_pages_are_shared():
    pages = Pages(slots=2, row_pages=4, pages=3, page=8)
    pages.reserve(0, 24)
    assert pages.share(1, donor=0, positions=20) == (16, None)  # the rest is prefilled once a page is free


def test_each_part_of_the_pool_serves_its_own_slots():
    """Four slots over two parts of three pages: slots 2 and 3 number their pages within the second part."""
    pages = Pages(slots=4, row_pages=2, pages=3, page=8, shards=2)
    assert [pages.shard(s) for s in range(4)] == [0, 0, 1, 1]
    assert pages.reserve(0, 16) == 16 and pages.reserve(1, 16) == 8  # part 0 has three pages
    assert pages.reserve(2, 16) == 16 and pages.table[2].tolist() == [0, 1]  # part 1's own pages 0 and 1
    assert pages.free() == 1


def test_a_kept_prefix_is_shared_like_a_slot_and_dropped_when_a_page_is_wanted():
    """Slot 0 leaves 20 tokens on three pages; slot 1 takes 18 of them; then slot 0 wants more pages than are free:
    the kept prefix goes, and only the page no slot shares comes free."""
    pages = Pages(slots=2, row_pages=4, pages=6, page=8)
    pages.reserve(0, 32)
    pages.keep(0, tuple(range(20)))  # pages 0, 1, 2 kept; page 3 free again
    assert pages.free() == 3 and pages.kept(0) == {0: tuple(range(20))}
    assert pages.share_kept(1, 0, 18) == (18, (0, 2, 3))  # two whole pages and a copy of the third
    # The two free pages, then the kept prefix dropped for the page it alone held; the pages slot 1 shares stay.
    assert pages.reserve(0, 32) == 24 and pages.kept(0) == {}
    assert pages.table[1, :3].tolist() == [0, 1, 3]  # slot 1's pages untouched
    pages.release(0)
    pages.release(1)
    assert pages.free() == 6
