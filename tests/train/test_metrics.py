"""`MetricsWriter`: a resumed run's metrics hold each step once."""

from jaxseeker.train.metrics import MetricsWriter, read_metrics


def _log(out, steps, value, **kwargs):
    writer = MetricsWriter(out, tensorboard=False, **kwargs)
    for step in steps:
        writer.write(step, {"loss": value})
    writer.close()


def test_resume_drops_the_rows_logged_after_the_checkpoint(tmp_path):
    _log(tmp_path, range(1, 6), 1.0)  # killed after logging step 5; its last checkpoint was step 3
    _log(tmp_path, range(4, 8), 2.0, resumed_from=3)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["loss"]) for r in rows] == [(1, 1.0), (2, 1.0), (3, 1.0), (4, 2.0), (5, 2.0), (6, 2.0),
                                                      (7, 2.0)]


def test_a_row_a_killed_run_left_unfinished_is_cut_on_resume(tmp_path):
    _log(tmp_path, range(1, 4), 1.0)
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 4, "lo')  # killed while writing step 4's row; its last checkpoint was step 3
    _log(tmp_path, range(4, 6), 2.0, resumed_from=3)
    assert [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "metrics.jsonl")] == [
        (1, 1.0), (2, 1.0), (3, 1.0), (4, 2.0), (5, 2.0)]


def test_a_new_run_replaces_old_rows_and_none_appends(tmp_path):
    _log(tmp_path, range(1, 4), 1.0)
    _log(tmp_path, range(1, 3), 2.0, resumed_from=0)
    assert [r["loss"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [2.0, 2.0]
    _log(tmp_path, [9], 3.0)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 9]


def test_tensorboard_writer_takes_the_purge_step(tmp_path):
    writer = MetricsWriter(tmp_path, resumed_from=2)  # tensorboardX's purge_step: the step after 2
    writer.write(3, {"loss": 1.0})
    writer.close()
    assert [p.name.startswith("events.out.tfevents") for p in (tmp_path / "tensorboard").iterdir()] == [True]


def test_a_line_separator_in_a_logged_string_does_not_end_its_row(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "note": "a\u2028b"}\n', encoding="utf-8")
    assert read_metrics(tmp_path / "metrics.jsonl") == [{"step": 1, "note": "a\u2028b"}]
