"""course_utils.jobs.resumable_train: its command line."""

import pytest

from course_utils.jobs.resumable_train import parse_args


def test_command_line_checks():
    cfg = parse_args(["--ckpt-dir", "d", "--max-steps", "7", "--step-delay", "0.1"])
    assert (cfg.ckpt_dir, cfg.max_steps, cfg.step_delay, cfg.epochs) == ("d", 7, 0.1, 2)
    with pytest.raises(SystemExit):
        parse_args(["--ckpt-dir", "d", "--keep-last", "0"])
