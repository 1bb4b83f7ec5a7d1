"""`MetricsWriter`: a resumed run's metrics hold each step once, in `metrics.jsonl` and as TensorBoard shows them."""

import struct
from pathlib import Path

from tensorboardX.proto.event_pb2 import Event, SessionLog

from jaxseeker.train.metrics import MetricsWriter, read_metrics


def _log(out, steps, value, tensorboard=False, **kwargs):
    writer = MetricsWriter(out, tensorboard=tensorboard, **kwargs)
    for step in steps:
        writer.write(step, {"loss": value})
    writer.close()


def test_resume_drops_the_rows_logged_after_the_checkpoint(tmp_path):
    _log(tmp_path, range(1, 6), 1.0)  # killed after logging step 5; its last checkpoint was step 3
    _log(tmp_path, range(4, 8), 2.0, resumed_from=3)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["loss"]) for r in rows] == [
        (1, 1.0),
        (2, 1.0),
        (3, 1.0),
        (4, 2.0),
        (5, 2.0),
        (6, 2.0),
        (7, 2.0),
    ]


def test_a_row_a_killed_run_left_unfinished_is_cut_on_resume(tmp_path):
    _log(tmp_path, range(1, 4), 1.0)
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 4, "lo')  # killed while writing step 4's row; its last checkpoint was step 3
    _log(tmp_path, range(4, 6), 2.0, resumed_from=3)
    assert [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "metrics.jsonl")] == [
        (1, 1.0),
        (2, 1.0),
        (3, 1.0),
        (4, 2.0),
        (5, 2.0),
    ]


def test_a_new_run_replaces_old_rows_and_none_appends(tmp_path):
    _log(tmp_path, range(1, 4), 1.0)
    _log(tmp_path, range(1, 3), 2.0, resumed_from=0)
    assert [r["loss"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [2.0, 2.0]
    _log(tmp_path, [9], 3.0)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2, 9]


def tensorboard_losses(log_dir: Path) -> dict[int, float]:
    """The `loss` points TensorBoard shows for `log_dir`: its event files read in name order (each a TFRecord
    stream: length, its CRC, the serialized Event, its CRC), where a SessionLog START at step T hides every point
    read before it at a step >= T (TensorBoard's purge of a restarted run)."""
    shown: dict[int, float] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            event = Event.FromString(data[pos + 12 : pos + 12 + length])
            pos += 12 + length + 4
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                shown = {step: v for step, v in shown.items() if step < event.step}
            shown.update((event.step, v.simple_value) for v in event.summary.value if v.tag == "loss")
    return shown


def test_tensorboard_hides_the_points_logged_after_the_checkpoint_a_run_resumes_from(tmp_path):
    _log(tmp_path, range(1, 6), 1.0, tensorboard=True)  # killed after logging step 5; its last checkpoint was step 2
    assert tensorboard_losses(tmp_path / "tensorboard") == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}
    _log(tmp_path, range(3, 5), 2.0, tensorboard=True, resumed_from=2)
    assert tensorboard_losses(tmp_path / "tensorboard") == {1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0}  # 5 is gone
    _log(tmp_path, [1], 3.0, tensorboard=True, resumed_from=0)  # a new run in the same directory
    assert tensorboard_losses(tmp_path / "tensorboard") == {1: 3.0}
    _log(tmp_path, [2], 4.0, tensorboard=True)  # None: appended, nothing hidden
    assert tensorboard_losses(tmp_path / "tensorboard") == {1: 3.0, 2: 4.0}
    assert len(list((tmp_path / "tensorboard").iterdir())) == 4  # one event file a writer, none overwritten


def test_a_line_separator_in_a_logged_string_does_not_end_its_row(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "note": "a\u2028b"}\n', encoding="utf-8")
    assert read_metrics(tmp_path / "metrics.jsonl") == [{"step": 1, "note": "a\u2028b"}]


def test_a_diverged_run_that_logged_a_nan_loss_is_read_back_and_resumed(tmp_path):
    _log(tmp_path, range(1, 4), float("nan"))  # json.dumps writes NaN, which strict JSON readers refuse
    _log(tmp_path, range(3, 5), 1.0, resumed_from=2)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and rows[0]["loss"] != rows[0]["loss"] and rows[3]["loss"] == 1.0
