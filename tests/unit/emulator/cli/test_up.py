"""`python -m emulator up --parameter-overrides`: SAM CLI's flag and syntax, merged over
samconfig's parameter_overrides; and the `up` arguments a fan-out mode takes."""

import subprocess
import sys

import pytest

from emulator.__main__ import _parser
from tests.unit.emulator.support import ROOT


def overrides(*argv: str) -> dict[str, str]:
    args = _parser().parse_args(["up", *argv])
    return dict(pair for pairs in args.parameter_overrides or () for pair in pairs)


def test_sam_clis_forms_are_taken():
    assert overrides() == {}
    assert overrides("--parameter-overrides", "FanOut=pipe") == {"FanOut": "pipe"}
    assert overrides("--parameter-overrides", "FanOut=pipe", "LogLevel=DEBUG") == {
        "FanOut": "pipe",
        "LogLevel": "DEBUG",
    }
    assert overrides("--parameter-overrides", "FanOut=pipe LogLevel='a b'") == {
        "FanOut": "pipe",
        "LogLevel": "a b",
    }
    assert overrides(
        "--parameter-overrides",
        "ParameterKey=FanOut,ParameterValue=router",
        "--parameter-overrides",
        "Stage=x=y",
    ) == {"FanOut": "router", "Stage": "x=y"}
    # the last of a key wins, as later flags do
    assert overrides("--parameter-overrides", "FanOut=pipe FanOut=router") == {"FanOut": "router"}


@pytest.mark.parametrize("bad", ["FanOut", "=pipe", "ParameterKey=FanOut", "'unclosed"])
def test_malformed_overrides_are_refused_with_usage(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["up", "--parameter-overrides", bad])
    assert exit_.value.code == 2
    assert "--parameter-overrides" in capsys.readouterr().err


def test_other_flags_still_follow():
    args = _parser().parse_args(
        ["up", "--parameter-overrides", "FanOut=pipe", "--duplicate-rate", "0.05"]
    )
    assert args.parameter_overrides == [[("FanOut", "pipe")]]
    assert args.duplicate_rate == 0.05


def test_a_fan_out_mode_the_template_does_not_allow_stops_up_with_one_error_line(tmp_path):
    """`make up FANOUT=foo`: refused at deploy, as CloudFormation refuses it, not a stack whose
    consumers are never fed."""
    done = subprocess.run(
        [sys.executable, "-m", "emulator", "up", "--port", "0", "--log-dir", str(tmp_path),
         "--parameter-overrides", "FanOut=foo"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == "error: deploy failed: Parameter 'FanOut' must be one of AllowedValues\n"
    assert "ready" not in done.stdout
