"""`python -m emulator invoke` where a newcomer stumbles: AWS_ENDPOINT_URL set and no stack
answering there, and a checkout without `sam build`. Each says what to do, exit 2, instead of the
function's failure (a ParamValidationError on the template's empty names, an ImportModuleError)."""

import shutil
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
TIMEOUT = 120


def invoke(logical_id: str, event: str, template: Path, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "emulator", "invoke", logical_id, "-e", event]
    return subprocess.run(
        [*command, "-t", str(template)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_no_stack_at_the_endpoint_is_said_instead_of_the_functions_failure():
    with socket.socket() as probe:  # a port nothing listens on: bound, then released
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    done = invoke(
        "RouteFunction",
        "events/connect-contact-flow.json",
        ROOT / "template.yaml",
        AWS_ENDPOINT_URL=endpoint,
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert done.returncode == 2, done.stderr
    assert f"no stack at {endpoint}" in done.stderr
    assert "make up" in done.stderr
    assert "ParamValidationError" not in done.stdout + done.stderr
    assert done.stdout == ""  # no function ran


def test_a_checkout_without_sam_build_is_told_to_run_make_build(tmp_path):
    for tree in ("functions", "layers"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("template.yaml", "samconfig.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = invoke(
        "IngestFunction",
        str(ROOT / "events" / "sqs-s3-test-event.json"),
        tmp_path / "template.yaml",
        AWS_DEFAULT_REGION="us-east-1",
    )
    assert done.returncode == 2, done.stderr
    assert "run `make build`" in done.stderr
    assert "aws_lambda_powertools" in done.stderr  # what the build would have installed
    assert done.stdout == ""  # no error document: the function never ran


def test_a_missing_event_file_is_one_error_line_not_a_traceback():
    done = invoke("RouteFunction", "events/no-such-event.json", ROOT / "template.yaml")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: cannot read the event file events/no-such-event.json: No such file or directory"
    ]
    assert "Traceback" not in done.stderr and done.stdout == ""
