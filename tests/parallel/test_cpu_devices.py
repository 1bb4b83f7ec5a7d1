"""Fake CPU devices get an XLA:CPU thread pool large enough that their collectives cannot deadlock."""

import os

from jaxseeker.parallel.cpu_devices import (
    THREADS_PER_DEVICE,
    cpu_pool_size,
    fake_cpu_devices_env,
    forced_device_count,
    size_cpu_thread_pool,
)


def test_forced_device_count_reads_the_last_flag():
    assert forced_device_count("--xla_force_host_platform_device_count=8") == 8
    assert (
        forced_device_count("--a=1 --xla_force_host_platform_device_count=2 --xla_force_host_platform_device_count=4")
        == 4
    )
    assert forced_device_count("--xla_backend_optimization_level=0") is None


def test_pool_has_threads_for_every_fake_device():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    assert size_cpu_thread_pool(env) == {"PJRT_NPROC": str(max(os.cpu_count(), THREADS_PER_DEVICE * 8))}
    assert cpu_pool_size(8) >= 8 * THREADS_PER_DEVICE


def test_pool_left_alone_for_one_device_or_a_size_the_user_chose():
    assert size_cpu_thread_pool({}) == {}
    assert size_cpu_thread_pool({"XLA_FLAGS": "--xla_force_host_platform_device_count=1"}) == {}
    flags = "--xla_force_host_platform_device_count=8"
    assert size_cpu_thread_pool({"XLA_FLAGS": flags, "PJRT_NPROC": "3"}) == {}
    assert size_cpu_thread_pool({"XLA_FLAGS": flags, "NPROC": "3"}) == {}


def test_fake_devices_env_keeps_other_flags_and_variables():
    env = fake_cpu_devices_env(4, {"XLA_FLAGS": "--xla_backend_optimization_level=0", "HOME": "/h"})
    assert env["XLA_FLAGS"] == "--xla_backend_optimization_level=0 --xla_force_host_platform_device_count=4"
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["HOME"] == "/h"
    assert int(env["PJRT_NPROC"]) >= 4 * THREADS_PER_DEVICE
