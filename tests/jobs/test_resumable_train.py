"""course_utils.jobs.resumable_train: its command line."""

import pytest

from course_utils.jobs.resumable_train import parse_args


def test_command_line_checks(capsys):
    cfg = parse_args(["--ckpt-dir", "d", "--max-steps", "7", "--step-delay", "0.1"])
    assert (cfg.ckpt_dir, cfg.max_steps, cfg.step_delay, cfg.epochs) == ("d", 7, 0.1, 2)
    with pytest.raises(SystemExit):
        parse_args(["--ckpt-dir", "d", "--keep-last", "0"])
    assert "--keep-last 0: must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--epochs", "3"])  # --ckpt-dir is required
    assert "the following arguments are required: --ckpt-dir" in capsys.readouterr().err


def test_the_command_line_is_the_config():
    """resumable.Config's fields are the options, with their help: nothing copied by hand."""
    import dataclasses

    from course_utils import job_config
    from course_utils.fault_tolerance.resumable import Config

    assert isinstance(parse_args(["--ckpt-dir", "d"]), Config)
    text = job_config.parser(Config).format_help()
    for f in dataclasses.fields(Config):
        assert "--" + f.name.replace("_", "-") in text
    assert "checkpoints kept (default: 3)" in text
