"""The engine with a mesh: the cache is placed by the logical-axis rules and the tokens do not change."""

from pathlib import Path

import pytest
from worker_support import run_worker


@pytest.fixture(scope="module")
def report() -> dict:
    result, _ = run_worker(Path(__file__).with_name("sharded_worker.py"), 4, timeout=300)
    return result


def test_engine_on_a_data_by_tensor_mesh_matches_one_device(report):
    assert report["devices"] == 4
    assert report["k_spec"] == "P('data', None, 'tensor')"  # one layer's pool [parts, pages, kv_heads, …]
    assert report["end_spec"] == "P('data',)"
    assert report["equal"]
    # The second rollout shares the first's 23 prompt tokens on their part of the pool; the third, on the other part,
    # shares nothing (no page crosses devices). The cache keeps its sharding (above).
    assert report["group_equal"] and report["shared_tokens"] == 23


def test_an_engine_whose_devices_each_hold_every_slot_decodes_the_running_rows_only(report):
    assert report["rows_split"] == [True, False]  # slots over data = 2; over nothing on a tensor-only mesh
    assert report["tensor_k_spec"] == "P(None, None, 'tensor')"  # kv heads over tensor, every page on each device
    assert report["tensor_equal"]


def test_a_part_of_the_pool_held_up_preempts_on_its_own_while_the_other_part_goes_on(report):
    """Part 0's two requests outgrow its 4 pages together (3 each) while part 1's one request decodes: part 0's last
    request gives its pages back at once (not once part 1 goes idle), so part 0's first request ends before part 1's."""
    assert report["parts_preempted"] >= 1 and report["parts_equal"]
    assert report["parts_order"].index("a") < report["parts_order"].index("long")
