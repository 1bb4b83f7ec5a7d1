"""`train.interrupt`: the first Ctrl-C or SIGTERM is a request the training loop acts on after its step."""

import os
import signal
import threading

import pytest

from jaxseeker.train.interrupt import Interrupted, Stopped, requested, stop_requests, stop_signals


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Ctrl-C as a plain `python` process has it (a pytest-xdist worker ignores SIGINT), restored afterwards."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_the_first_signal_is_recorded_and_the_old_handlers_return():
    before = signal.getsignal(signal.SIGTERM)
    with stop_requests() as stop:
        assert stop.signal_name is None
        os.kill(os.getpid(), signal.SIGTERM)  # what a preempted VM receives
        assert stop.signal_name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_ctrl_c_stops_at_once(capsys):
    with pytest.raises(KeyboardInterrupt), stop_requests() as stop:
        signal.raise_signal(signal.SIGINT)
        assert stop.signal_name == "SIGINT"
        signal.raise_signal(signal.SIGINT)  # Python's own handler again: KeyboardInterrupt
    assert "SIGINT: stopping after this step" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nothing_is_caught_off_the_main_thread_or_when_disabled():
    seen = []
    thread = threading.Thread(target=lambda: seen.append(stop_requests().__enter__().signal_name))
    thread.start()
    thread.join()
    with stop_requests(enabled=False):
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert seen == [None]


def test_an_interrupted_run_names_its_step_and_the_shell_status():
    err = Interrupted("SIGTERM", 40, "runs/x")
    assert str(err) == "stopped by SIGTERM after step 40; its checkpoint is saved under runs/x"
    assert (err.exit_code, Interrupted("SIGINT", 1, ".").exit_code) == (143, 130)
    assert isinstance(err, KeyboardInterrupt)  # code that does not know it stops as on Ctrl-C


def test_inside_a_command_a_signal_no_loop_listens_for_stops_at_once():
    with pytest.raises(Stopped, match="^stopped by SIGTERM$") as stopped, stop_signals():
        os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.exit_code == 143 and requested() is None  # the block closed: nothing stays recorded
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_loop_inside_a_command_shares_its_request_and_it_stays_after_the_loop():
    with stop_signals() as command:
        with stop_requests() as loop:
            os.kill(os.getpid(), signal.SIGTERM)  # during the loop's last step: it ends as it would have
            assert loop is command and loop.signal_name == "SIGTERM"
        assert requested() == "SIGTERM"  # the pipeline then starts no other stage
        with pytest.raises(Stopped, match="^stopped by SIGINT$"):  # a second signal: at once
            signal.raise_signal(signal.SIGINT)
