"""MeshConfig resolution, mesh construction and the multi-host start decision."""

from __future__ import annotations

import jax
import pytest

from jaxseeker.parallel import (
    MESH_AXES,
    MeshConfig,
    is_main_process,
    make_mesh,
    maybe_initialize_distributed,
    parse_mesh,
)
from jaxseeker.parallel.mesh_config import mesh_text


def test_minus_one_takes_the_remaining_devices():
    assert MeshConfig(data=2, fsdp=-1, tensor=2).resolve(16) == (2, 4, 2, 1, 1)
    assert MeshConfig(data=-1, fsdp=1).resolve(8) == (8, 1, 1, 1, 1)
    assert MeshConfig(fsdp=-1, context=4).resolve(32) == (1, 8, 1, 1, 4)


def test_wrong_device_count_names_the_shape():
    with pytest.raises(ValueError, match="needs 8 devices, found 4"):
        MeshConfig(data=2, fsdp=2, tensor=2).resolve(4)
    with pytest.raises(ValueError, match="not divisible by 3"):
        MeshConfig(data=3, fsdp=-1).resolve(8)


def test_bad_fields_are_named():
    with pytest.raises(ValueError, match="MeshConfig.tensor"):
        MeshConfig(tensor=0)
    with pytest.raises(ValueError, match="only one axis may be -1"):
        MeshConfig(data=-1, fsdp=-1)
    known = r"known keys: \['data', 'fsdp', 'tensor', 'expert', 'context'\]"
    with pytest.raises(ValueError, match=r"unknown keys \['model'\]; " + known):
        MeshConfig.from_dict({"data": 1, "model": 2})


def test_a_mesh_flag_is_read_and_bad_ones_are_quoted():
    assert parse_mesh("tensor=4") == MeshConfig(fsdp=-1, tensor=4)  # axes left out keep the defaults
    assert parse_mesh("fsdp=8,context=4") == MeshConfig(fsdp=8, context=4)
    assert parse_mesh("data=2, fsdp=1,tensor=2,") == MeshConfig(data=2, fsdp=1, tensor=2)
    with pytest.raises(ValueError, match=r"'tensor=2,pipe=2': expected axis=size with axes .*, got 'pipe=2'"):
        parse_mesh("tensor=2,pipe=2")
    with pytest.raises(ValueError, match="'tensor=two': size of 'tensor' is not an integer: 'two'"):
        parse_mesh("tensor=two")
    with pytest.raises(ValueError, match="'data=-1': MeshConfig: only one axis may be -1"):
        parse_mesh("data=-1")
    assert mesh_text(None) == "one device"
    assert (
        mesh_text(make_mesh(parse_mesh("tensor=1"))) == f"a data=1,fsdp={jax.device_count()},tensor=1,expert=1 mesh of "
        f"{jax.device_count()} device{'s' * (jax.device_count() > 1)}"
    )


def test_default_mesh_is_fsdp_over_all_devices():
    mesh = make_mesh(MeshConfig())
    assert mesh.axis_names == MESH_AXES
    assert dict(mesh.shape) == {"data": 1, "fsdp": jax.device_count(), "tensor": 1, "expert": 1, "context": 1}


def test_single_process_run_does_not_start_distributed(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "localhost")  # a single-host TPU VM
    assert maybe_initialize_distributed() is False
    assert is_main_process()
