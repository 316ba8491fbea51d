"""The rich dashboard on a pseudo-terminal: it draws progress and curves, then leaves the screen
clean (cursor shown, panel erased) at the end and on Ctrl-C."""

import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("rich")
pexpect = pytest.importorskip("pexpect")

SCRIPT = Path(__file__).parent / "train_toy.py"
SHOW_CURSOR = "\x1b[?25h"


def spawn(run_dir, mode="new"):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SCRIPT.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    return pexpect.spawn(sys.executable, [str(SCRIPT), str(run_dir), mode, "auto"], env=env,
                         encoding="utf-8", dimensions=(30, 120), timeout=60)


def test_sparkline():
    from burnish.train.dashboard import sparkline

    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([2.0, 2.0]) == "▁▁"
    assert sparkline([]) == ""


def test_dashboard_draws_and_cleans_up(tmp_path):
    child = spawn(tmp_path)
    child.expect("train curve")
    child.expect(r"run .*remaining \S+")
    child.expect("epoch 2/3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    tail = child.before
    assert re.search("[▁▂▃▄▅▆▇█]{3}", tail)
    # After the last frame: the cursor comes back, the panel is erased, the summary is printed.
    after = tail[tail.rindex(SHOW_CURSOR):]
    assert "valid  accuracy" in after and "train curve" not in after
    assert "finished" in after


def test_dashboard_on_ctrl_c(tmp_path):
    child = spawn(tmp_path)
    child.expect("epoch 2/3")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    after = child.before[child.before.rindex(SHOW_CURSOR):]
    assert "interrupted" in after and "Traceback" not in after
    resumed = spawn(tmp_path, "resume")
    resumed.expect(pexpect.EOF)
    resumed.close()
    assert resumed.exitstatus == 0


def test_keys_move_between_metrics_and_the_terminal_is_restored(tmp_path):
    child = spawn(tmp_path)
    child.expect("▶ loss")
    child.expect("train curve")
    child.send("j")
    child.expect("▶ accuracy")
    child.expect(r"accuracy: range \S+ to \S+")
    child.send("\x1b[A")
    child.expect("▶ loss")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_key_reader_uses_cbreak_mode_and_restores_the_terminal(monkeypatch):
    import termios
    import time

    from burnish.train.keys import KeyReader

    master, slave = os.openpty()
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r", closefd=False))
    moves = []
    reader = KeyReader(moves.append)
    before = termios.tcgetattr(slave)
    assert before[3] & termios.ECHO
    reader.start()
    assert not termios.tcgetattr(slave)[3] & termios.ECHO
    os.write(master, b"j")
    os.write(master, b"\x1b[A")
    deadline = time.monotonic() + 5
    while len(moves) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    reader.stop()
    assert moves == [1, -1]
    assert termios.tcgetattr(slave) == before
    os.close(master)
    os.close(slave)
