"""Stage bookkeeping: reuse a finished stage with the same inputs, resume an unfinished one only with them."""

import json
import os
import signal

import pytest

from jaxseeker.pipeline.stages import StageRunner, StopAfter, fingerprint
from jaxseeker.train.heap import resident_gib
from jaxseeker.train.interrupt import Stopped, stop_requests, stop_signals


def _stage(calls):
    def fn(out):
        calls.append(sorted(p.name for p in out.iterdir()))
        (out / "checkpoint").write_text("partial")
        return {"n": len(calls)}

    return fn


def test_a_finished_stage_is_reused_only_for_the_same_inputs(tmp_path):
    runner, calls = StageRunner(tmp_path, log=lambda _: None), []
    key = fingerprint({"steps": 3})
    assert runner.run("sft", key, _stage(calls)) == {"n": 1}
    assert runner.run("sft", key, _stage(calls)) == {"n": 1} and runner.reused == ["sft"]
    assert runner.run("sft", fingerprint({"steps": 4}), _stage(calls)) == {"n": 2}
    assert calls[1] == ["started.json"]  # the old output was wiped


def test_a_stage_marker_records_its_own_peak_resident_memory_and_what_it_started_with(tmp_path):
    import numpy as np

    def holding(mib):
        def stage(out):
            block = np.ones(mib * 2**20 // 8)  # touched: resident; freed when the stage returns
            return {"sum": float(block.sum())}

        return stage

    def reclaimable_gib() -> float:
        """The process's resident file-backed and shared pages, which the kernel may drop under memory pressure
        while a stage runs: by that much the stage's peak can lie closer to what the process held at its start
        (each field rounded to 0.01 GiB, so 0.005 added for each)."""
        return sum((resident_gib(field) or 0.0) + 0.005 for field in ("RssFile", "RssShmem"))

    runner = StageRunner(tmp_path, log=lambda _: None)
    slack = {"sft": reclaimable_gib()}
    runner.run("sft", fingerprint({}), holding(1024))
    slack["eval"] = reclaimable_gib()
    runner.run("eval", fingerprint({}), holding(64))
    sft, ev = (json.loads((tmp_path / s / "done.json").read_text()) for s in ("sft", "eval"))
    for name, done, mib in (("sft", sft, 1024), ("eval", ev, 64)):
        assert done["peak_rss_gib"] >= mib / 1024
        if "start_rss_gib" in done:  # Linux
            # Each figure is rounded to 0.01 GiB, so their difference may be 0.01 short, and is itself a float sum.
            assert done["peak_rss_gib"] - done["start_rss_gib"] >= mib / 1024 - 0.01 - slack[name] - 1e-9
    if ev["peak_since"] == "stage":  # the kernel let the mark be reset: the eval's peak is not the SFT's
        assert ev["peak_rss_gib"] < sft["peak_rss_gib"] - 256 / 1024


def test_a_dry_run_names_what_would_be_reused_run_or_resumed_and_touches_nothing(tmp_path):
    calls, key = [], fingerprint({"steps": 3})
    StageRunner(tmp_path, log=lambda _: None).run("qa", key, _stage(calls))
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "started.json").write_text(json.dumps({"key": key}))  # killed part-way
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    lines = []
    dry = StageRunner(tmp_path, log=lines.append, until="sft", dry_run=True)
    assert dry.run("qa", key, _stage(calls)) == {"n": 1}  # a reused stage's metrics, as a real run reads them
    with pytest.raises(StopAfter):
        dry.run("sft", key, _stage(calls), resumable=True)
    assert (dry.reused, dry.to_run, len(calls)) == (["qa"], ["sft"], 1)  # nothing ran
    assert lines[-1] == "[sft] would resume" and sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    StageRunner(tmp_path / "elsewhere", dry_run=True)
    assert not (tmp_path / "elsewhere").exists()  # no run directory either


def test_an_unfinished_resumable_stage_continues_only_with_the_inputs_it_started_with(tmp_path):
    runner, calls = StageRunner(tmp_path, log=lambda _: None), []
    old, new = fingerprint({"hidden": 256}), fingerprint({"hidden": 128})

    def killed(out):  # writes a checkpoint, then Ctrl-C
        calls.append(sorted(p.name for p in out.iterdir()))
        (out / "checkpoint").write_text(f"partial {len(calls)}")
        raise KeyboardInterrupt

    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            runner.run("sft", old, killed, resumable=True)
        assert not (tmp_path / "sft" / "done.json").exists()  # interrupted: not done
    assert calls == [["started.json"], ["checkpoint", "started.json"]]  # the second went on from the first's
    assert (tmp_path / "sft" / "checkpoint").read_text() == "partial 2"
    assert json.loads((tmp_path / "sft" / "started.json").read_text()) == {"key": old}
    runner.run("sft", old, _stage(calls), resumable=True)
    assert calls[-1] == ["checkpoint", "started.json"]  # resumed: the checkpoint is still there
    (tmp_path / "sft" / "done.json").unlink()
    runner.run("sft", new, _stage(calls), resumable=True)
    assert calls[-1] == ["started.json"]  # other inputs: the old checkpoint would not fit, so it is gone


def test_a_damaged_marker_means_not_done_and_a_killed_stage_still_resumes(tmp_path):
    runner, calls = StageRunner(tmp_path, log=lambda _: None), []
    key = fingerprint({"steps": 3})
    runner.run("sft", key, _stage(calls), resumable=True)
    (tmp_path / "sft" / "done.json").write_text('{"key": "')  # torn by a kill (before markers were written whole)
    assert runner.run("sft", key, _stage(calls), resumable=True) == {"n": 2}
    assert calls[-1] == ["checkpoint", "done.json", "started.json"]  # resumed from its checkpoints, not wiped
    assert json.loads((tmp_path / "sft" / "done.json").read_text())["metrics"] == {"n": 2}
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "started.json").write_bytes(b"\xff")
    assert runner.run("qa", key, _stage(calls)) == {"n": 3} and calls[-1] == ["started.json"]
    assert not list(tmp_path.glob("*/*.tmp"))  # markers are written to a temporary file, then renamed


def test_the_pipeline_starts_no_stage_once_a_stop_is_recorded(tmp_path):
    ran = []

    def stage(name):
        def fn(out):
            ran.append(name)
            with stop_requests():  # a loop listens: the signal waits for its step
                if name == "b":
                    os.kill(os.getpid(), signal.SIGTERM)
            return {"stage": name}

        return fn

    runner = StageRunner(tmp_path, log=lambda _: None)
    with stop_signals():
        runner.run("a", "1", stage("a"))
        runner.run("b", "1", stage("b"))  # the signal comes during b's last step: b finishes and is saved
        with pytest.raises(Stopped, match="^stopped by SIGTERM before stage c; the stages before it are saved$"):
            runner.run("c", "1", stage("c"))
    assert ran == ["a", "b"] and (tmp_path / "b" / "done.json").exists() and not (tmp_path / "c").exists()
    again = StageRunner(tmp_path, log=lambda _: None)
    assert [again.run(n, "1", stage(n)) for n in "abc"] == [{"stage": n} for n in "abc"]  # goes on from c
    assert ran == ["a", "b", "c"] and again.reused == ["a", "b"]
