"""The engine with a mesh: the cache is placed by the logical-axis rules and the tokens do not change."""

import json
import subprocess
import sys
from pathlib import Path

from jaxseeker.parallel.cpu_devices import fake_cpu_devices_env


def test_engine_on_a_data_by_tensor_mesh_matches_one_device():
    env = fake_cpu_devices_env(4)
    worker = Path(__file__).with_name("sharded_worker.py")
    proc = subprocess.run(
        [sys.executable, str(worker)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["devices"] == 4
    assert report["k_spec"] == "P('data', 'tensor')"  # one layer's [batch, kv_heads, seq, head_dim]
    assert report["end_spec"] == "P('data',)"
    assert report["equal"]
