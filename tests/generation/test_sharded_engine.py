"""The engine with a mesh: the cache is placed by the logical-axis rules and the tokens do not change."""

from pathlib import Path

from worker_support import run_worker


def test_engine_on_a_data_by_tensor_mesh_matches_one_device():
    report, _ = run_worker(Path(__file__).with_name("sharded_worker.py"), 4, timeout=300)
    assert report["devices"] == 4
    assert report["k_spec"] == "P('data', 'tensor')"  # one layer's [batch, kv_heads, seq, head_dim]
    assert report["end_spec"] == "P('data',)"
    assert report["equal"]
    assert report["group_equal"] and report["shared_tokens"] == 23  # the copied cache keeps its sharding (above)
