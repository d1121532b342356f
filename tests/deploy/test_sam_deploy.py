"""The deploy rehearsal: the pipeline's own commands (.github/workflows: `sam package`, then `sam
deploy --config-env <env>` with the same flags; `sam delete` as feature-cleanup runs it), by the
real SAM CLI (.tools/bin/sam), against an empty local stack (`python -m emulator up --no-deploy`)
through AWS_ENDPOINT_URL, as docs/deploy.md says. The tests run in order, on one stack: test
deploys, and the integration suite passes against it by AWS_SAM_STACK_NAME; prod without
AlarmEmail, ConnectInstanceArn and ContactsKeyUsers is refused with the template's own
AssertDescription and leaves nothing; prod with the documented values deploys; a second deploy
of a changed template updates test in place; `sam delete` removes it.

Needs `make build` (.aws-sam/build, what the pipeline's build job uploads). Every deploy packages
one copy of it, taken at the start, as the pipeline's jobs get the build job's one artifact: the
local stacks `make test` runs beside this one execute the functions from .aws-sam/build and
leave bytecode there, so packaging it again later would deploy other code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from emulator.process import REGION, LocalStackProcess, describe_failures, sam_cli_environment
from harness import ROOT
from ops.stack import samconfig_stack_name
from tests.session_stack import empty_stack

SAM = ROOT / ".tools" / "bin" / "sam"
BUILD = ROOT / ".aws-sam" / "build"
PORTS = range(4900, 4950)
ARTIFACTS_BUCKET = "rehearsal-artifacts"  # the bootstrap's ArtifactsBucket, for every stage
EXECUTION_ROLE = "arn:aws:iam::123456789012:role/pipeline/cfn-execution-role"
# docs/deploy.md step 3: what prod cannot run without, example values.
PROD_VALUES = (
    "AlarmEmail=oncall@example.com",
    "ConnectInstanceArn=arn:aws:connect:us-east-1:123456789012:instance/"
    "0b5e7a7c-1f1e-4f5b-9a43-3c2b1d0e9f11",
    "ContactsKeyUsers=arn:aws:iam::123456789012:role/contact-exports",
)
# Guards against a hang, not budgets: beside make test's other phases on a slow 2-core machine
# the prod deploy took over 300 s (about 60 s alone), the suite over 600 s.
SAM_TIMEOUT = 900
SUITE_TIMEOUT = 1200  # the suite ~2 minutes alone, the poison test ~5


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The build's template, in the copy every deploy of the rehearsal packages."""
    if not (BUILD / "template.yaml").exists() or not SAM.exists():
        pytest.fail("run `make setup build` first: the rehearsal deploys .aws-sam/build")
    copy = tmp_path_factory.mktemp("build") / "build"
    shutil.copytree(BUILD, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy / "template.yaml"


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory) -> Iterator[LocalStackProcess]:
    with empty_stack(tmp_path_factory.mktemp("stack"), PORTS) as local:
        yield local


@pytest.fixture(scope="module")
def endpoint(local_stack: LocalStackProcess) -> str:
    return local_stack.endpoint


@pytest.fixture(scope="module")
def environment(endpoint: str) -> dict[str, str]:
    env = sam_cli_environment(endpoint)
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **_credentials()).create_bucket(
        Bucket=ARTIFACTS_BUCKET
    )
    return env


def _credentials() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _client(endpoint: str, service: str):
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION, **_credentials())


def _sam(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SAM), *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SAM_TIMEOUT,
        check=False,
    )


def _package_and_deploy(
    env: dict[str, str],
    environment_name: str,
    tmp: Path,
    template: Path,
    *,
    config_file: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """pipeline.yaml's `sam package` then `sam deploy` (release-prod.yaml's for prod)."""
    config_file = config_file or ROOT / "samconfig.toml"
    stack_name = samconfig_stack_name(config_file, environment_name)
    # The SAM CLI reads a relative --config-file beside the template (the pipeline's packaged
    # template is in the checkout's root, beside samconfig.toml); here it is in tmp.
    config = ("--config-file", config_file)
    where = ("--s3-bucket", ARTIFACTS_BUCKET, "--s3-prefix", stack_name, "--region", REGION)
    packaged = tmp / f"packaged-{environment_name}.yaml"
    package = _sam(
        env, "package", *config, "--config-env", environment_name, "--template-file", template,
        *where, "--output-template-file", packaged,
    )  # fmt: skip
    assert package.returncode == 0, package.stdout + package.stderr
    return _sam(
        env, "deploy", *config, "--config-env", environment_name, "--template-file", packaged,
        "--stack-name", stack_name, *where, "--role-arn", EXECUTION_ROLE,
        "--capabilities", "CAPABILITY_IAM", "--no-resolve-s3", "--no-confirm-changeset",
        "--no-fail-on-empty-changeset", "--no-progressbar",
    )  # fmt: skip


def _stack(endpoint: str, name: str) -> dict | None:
    try:
        return _client(endpoint, "cloudformation").describe_stacks(StackName=name)["Stacks"][0]
    except ClientError as error:
        assert f"Stack with id {name} does not exist" in str(error)
        return None


def _resources(endpoint: str, name: str) -> dict[str, dict]:
    described = _client(endpoint, "cloudformation").describe_stack_resources(StackName=name)
    return {r["LogicalResourceId"]: r for r in described["StackResources"]}


def _outputs(stack: dict) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def test_the_test_environment_deploys_and_runs_the_uploaded_code(
    endpoint, environment, built, tmp_path
):
    result = _package_and_deploy(environment, "test", tmp_path, built)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Successfully created/updated stack - last-agent-routing-test" in result.stdout
    stack = _stack(endpoint, "last-agent-routing-test")
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    resources = _resources(endpoint, "last-agent-routing-test")
    assert all(r["PhysicalResourceId"] and r["ResourceType"] for r in resources.values())
    assert resources["IngestQueuePolicy"]["ResourceType"] == "AWS::SQS::QueuePolicy"
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}
    assert parameters["Stage"] == "test"
    # RouteFunction runs from the artifact `sam package` uploaded: it answers a fresh stack.
    route = _client(endpoint, "lambda").invoke(
        FunctionName=_outputs(stack)["RouteFunctionName"],
        Payload=b'{"Details": {"ContactData": {"CustomerEndpoint": {"Address": "+15550100"}}}}',
    )
    assert route["Payload"].read() == b'{"found": "false"}'


# What a deployed stack cannot run: the tests of the local stack's fault switches, and the docs'
# commands for the local stack. Every other integration test must pass against it.
LOCAL_ONLY = ("needs local fault injection", "the docs' local commands", "the AWS CLI's endpoint")
RUNNABLE_ON_A_DEPLOYED_STACK = 27  # with the contact records, contact redrive and mail tests
# 5 receives x the test stage's 60 s visibility timeout (the pipeline's role may not shorten it:
# no sqs:SetQueueAttributes on stack queues), and its messages keep the stack from settling for
# the tests that wait for that: it runs after the rest, beside the prod and update steps.
POISON = (
    "tests/integration/test_failures.py::test_poison_notification_ends_in_the_dead_letter_queue"
)
POISON_SECONDS = 5 * 60
PROGRESS_SECONDS = 30


def _integration_tests(environment: dict[str, str], log: Path, *selection: str) -> subprocess.Popen:
    """pytest of ``selection`` against the deployed test stack by AWS_SAM_STACK_NAME (here with
    AWS_ENDPOINT_URL: tests/integration/conftest.py), its output in ``log``."""
    with log.open("w") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
             "-rs", *selection],
            cwd=ROOT,
            env=environment | {"AWS_SAM_STACK_NAME": "last-agent-routing-test"},
            stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def _passed(run: subprocess.Popen, log: Path, local_stack: LocalStackProcess) -> int:
    """How many passed; the run must pass whole and skip only what needs the local stack."""
    returncode = run.wait(timeout=SUITE_TIMEOUT)
    text = log.read_text()
    # What failed first, with the log's path: CI may cut a long message short.
    failed = describe_failures(local_stack.failed_invocations)
    assert returncode == 0, (
        f"failed invocations: {failed} (stack log {local_stack.log_path})\n{text}\n"
        f"{local_stack.tail()}"
    )
    assert "stack: last-agent-routing-test on http://127.0.0.1:" in text
    skipped = [line for line in text.splitlines() if line.startswith("SKIPPED")]
    assert all(any(why in line for why in LOCAL_ONLY) for line in skipped), skipped
    counted = re.search(r"\b(\d+) passed\b", text)
    return int(counted[1]) if counted else 0


@pytest.fixture(scope="module")
def poison_run() -> Iterator[dict[str, Any]]:
    """The poison test's run, started by the suite's test and awaited before `sam delete`."""
    started: dict[str, Any] = {}
    yield started
    if "run" in started and started["run"].poll() is None:  # a test before the delete failed
        started["run"].kill()


def test_the_integration_suite_passes_against_the_stack_sam_deployed(
    local_stack, environment, poison_run, tmp_path
):
    """The whole suite, as the pipeline's integration-test job runs it after deploy-test: the
    poison test then goes on beside the next steps (test_sam_delete_removes_the_stack waits for
    it). Only what needs the local stack itself is skipped, as on AWS."""
    rest = tmp_path / "suite.log"
    suite = _integration_tests(environment, rest, "tests/integration", "--deselect", POISON)
    passed = _passed(suite, rest, local_stack)
    assert passed == RUNNABLE_ON_A_DEPLOYED_STACK - 1, rest.read_text()
    poison_run["log"] = tmp_path / "poison.log"
    poison_run["run"] = _integration_tests(environment, poison_run["log"], POISON)
    poison_run["started"] = time.monotonic()


def test_prod_without_what_step_3_sets_is_refused_with_the_templates_message(
    endpoint, environment, built, tmp_path
):
    result = _package_and_deploy(environment, "prod", tmp_path, built)

    assert result.returncode != 0
    assert "Stage=prod needs AlarmEmail (samconfig.toml [prod.deploy.parameters])" in (
        result.stdout + result.stderr
    )
    assert _stack(endpoint, "last-agent-routing-prod") is None  # refused before any change


def test_prod_with_the_documented_values_deploys(endpoint, environment, built, tmp_path):
    samconfig = tmp_path / "samconfig.toml"
    text = (ROOT / "samconfig.toml").read_text()
    prod = tomllib.loads(text)["prod"]["deploy"]["parameters"]["parameter_overrides"]
    samconfig.write_text(text.replace(prod, " ".join((prod, *PROD_VALUES))))

    result = _package_and_deploy(environment, "prod", tmp_path, built, config_file=samconfig)

    assert result.returncode == 0, result.stdout + result.stderr
    stack = _stack(endpoint, "last-agent-routing-prod")
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert "RouteFunctionConnectPermission" in _resources(endpoint, "last-agent-routing-prod")


def test_a_changed_template_updates_the_changed_resources_and_keeps_the_rest(
    endpoint, environment, built, tmp_path
):
    before = _resources(endpoint, "last-agent-routing-test")
    changed = tmp_path / "template.yaml"
    text = built.read_text()
    added = "\n  RehearsalQueue:\n    Type: AWS::SQS::Queue\n"
    changed.write_text(re.sub(r"^Resources:\n", "Resources:" + added, text, count=1, flags=re.M))
    # the relative CodeUri / ContentUri of the build resolve beside the template
    for entry in built.parent.iterdir():
        if entry.is_dir():
            (tmp_path / entry.name).symlink_to(entry)

    result = _package_and_deploy(environment, "test", tmp_path, changed)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "+ Add" in result.stdout and "RehearsalQueue" in result.stdout
    assert _stack(endpoint, "last-agent-routing-test")["StackStatus"] == "UPDATE_COMPLETE"
    after = _resources(endpoint, "last-agent-routing-test")
    assert after["RehearsalQueue"]["ResourceType"] == "AWS::SQS::Queue"
    kept = ("ContactsTable", "ContactsBucket", "IngestQueue", "IngestFunction")
    for logical_id in kept:
        assert after[logical_id]["PhysicalResourceId"] == before[logical_id]["PhysicalResourceId"]


def _say_while_waiting(run: subprocess.Popen, started: float, capsys) -> None:
    """A line every PROGRESS_SECONDS on the terminal while the poison test runs: what it waits for
    and how long it has, so a minutes-long wait is not taken for a hang."""
    while run.poll() is None:
        waited = time.monotonic() - started
        with capsys.disabled():
            print(
                f"\ndeploy rehearsal: the poison test waits for SQS to receive its message 5 times "
                f"(the test stage's 60 s visibility timeout each): {waited:.0f} s of ~"
                f"{POISON_SECONDS} s",
                flush=True,
            )
        try:
            run.wait(timeout=PROGRESS_SECONDS)
        except subprocess.TimeoutExpired:
            continue


def test_sam_delete_removes_the_stack(local_stack, endpoint, environment, poison_run, capsys):
    if "run" in poison_run:  # the suite's last test, still running against this stack
        _say_while_waiting(poison_run["run"], poison_run["started"], capsys)
        assert _passed(poison_run["run"], poison_run["log"], local_stack) == 1
    stack = _stack(endpoint, "last-agent-routing-test")
    bucket = _outputs(stack)["ContactsBucketName"]
    # feature-cleanup.yaml empties the versioned contacts bucket first, as CloudFormation needs
    versions = _client(endpoint, "s3").list_object_versions(Bucket=bucket)
    for version in versions.get("Versions", []) + versions.get("DeleteMarkers", []):
        _client(endpoint, "s3").delete_object(
            Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"]
        )

    result = _sam(
        environment, "delete", "--no-prompts", "--stack-name", "last-agent-routing-test",
        "--region", REGION, "--s3-bucket", ARTIFACTS_BUCKET, "--s3-prefix",
        "last-agent-routing-test",
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert _stack(endpoint, "last-agent-routing-test") is None
    assert _stack(endpoint, "last-agent-routing-prod")["StackStatus"] == "CREATE_COMPLETE"
