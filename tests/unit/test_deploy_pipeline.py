"""Shape of the delivery pipeline: the GitHub workflows and the bootstrap template.

Parses .github/workflows/*.yaml and pipeline/bootstrap.yaml (no network, no AWS) and checks the
properties docs/pipeline.md promises: one build, one package per stage, test before prod with the
integration tests in between, prod behind the `prod` environment, OIDC only where a role is
assumed, serialised deploys, pinned actions, and a trust policy scoped to this repository.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulator.iam.policy import Policy, Request, evaluate

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BOOTSTRAP = ROOT / "pipeline" / "bootstrap.yaml"

SHA_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")
CONFIGURE_AWS = "aws-actions/configure-aws-credentials@"


# ------------------------------------------------------------------------------------ helpers
def load_workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def all_workflows() -> dict[str, dict[str, Any]]:
    return {path.name: load_workflow(path.name) for path in sorted(WORKFLOWS.glob("*.yaml"))}


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as boolean True.
    on = workflow.get("on", workflow.get(True))
    return on if isinstance(on, dict) else {name: None for name in ([on] if on else [])}


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])


def run_text(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def uses(job: dict[str, Any]) -> list[str]:
    return [step["uses"] for step in steps(job) if "uses" in step]


def assumes_role(job: dict[str, Any]) -> bool:
    return any(ref.startswith(CONFIGURE_AWS) for ref in uses(job))


def commands(job: dict[str, Any], tool: str) -> list[str]:
    """Shell commands (continuation lines joined) that invoke `tool` (e.g. 'sam deploy')."""
    joined = run_text(job).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if re.search(rf"\b{tool}\b", line)]


def downloads_from_another_run(job: dict[str, Any]) -> bool:
    return any(
        "run-id" in step.get("with", {})
        for step in steps(job)
        if step.get("uses", "").startswith("actions/download-artifact@")
    )


def builds(job: dict[str, Any]) -> bool:
    return bool(commands(job, "sam build") or commands(job, "make build"))


def environment_name(job: dict[str, Any]) -> str | None:
    env = job.get("environment")
    return env.get("name") if isinstance(env, dict) else env


def needs(job: dict[str, Any]) -> list[str]:
    value = job.get("needs", [])
    return [value] if isinstance(value, str) else list(value)


def ancestors(jobs: dict[str, Any], name: str) -> set[str]:
    seen: set[str] = set()
    todo = needs(jobs[name])
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(needs(jobs[current]))
    return seen


def flag(command: str, name: str) -> str | None:
    match = re.search(rf"{name}[ =]\"?([^\s\"]+)\"?", command)
    return match.group(1) if match else None


# ------------------------------------------------------------------------ every workflow
def test_workflows_exist():
    assert {
        "ci.yaml",
        "pipeline.yaml",
        "release-prod.yaml",
        "feature.yaml",
        "feature-cleanup.yaml",
        "locks.yaml",
    } <= set(all_workflows())


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yaml")))
def test_token_is_least_privilege(name):
    workflow = load_workflow(name)
    assert workflow.get("permissions") in ({}, {"contents": "read"}), (
        "top-level permissions must be {} or contents: read"
    )
    for job_name, job in workflow["jobs"].items():
        perms = job.get("permissions")
        assert isinstance(perms, dict), f"{job_name}: set job permissions explicitly"
        allowed = {"contents": "read", "id-token": "write"}
        # actions: read exactly where a job takes another run's build artifact
        if downloads_from_another_run(job):
            allowed["actions"] = "read"
        assert set(perms.items()) <= set(allowed.items()), f"{job_name}: {perms}"
        # id-token: write exactly on the jobs that assume an AWS role
        assert (perms.get("id-token") == "write") == assumes_role(job), job_name


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yaml")))
def test_every_action_is_pinned_to_a_commit_with_its_version(name):
    text = (WORKFLOWS / name).read_text()
    refs = [USES_LINE.match(line) for line in text.splitlines()]
    refs = [match for match in refs if match]
    assert refs, "no actions used?"
    for match in refs:
        ref, rest = match.group(1), match.group(2)
        assert SHA_PINNED.match(ref), f"{ref} is not pinned to a full commit SHA"
        assert re.search(r"#\s*v\d", rest), f"{ref}: add the release as a comment (# vX.Y.Z)"


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yaml")))
def test_no_long_lived_keys_and_no_persisted_git_credentials(name):
    text = (WORKFLOWS / name).read_text()
    for forbidden in ("aws-access-key-id", "aws-secret-access-key", "AWS_SECRET_ACCESS_KEY"):
        assert forbidden not in text
    for job_name, job in load_workflow(name)["jobs"].items():
        for step in steps(job):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, job_name
            if step.get("uses", "").startswith(CONFIGURE_AWS):
                inputs = step["with"]
                assert set(inputs) >= {"role-to-assume", "aws-region"}, job_name
                assert inputs["role-to-assume"] == "${{ vars.PIPELINE_ROLE_ARN }}", job_name


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yaml")))
def test_jobs_that_assume_a_role_run_in_a_github_environment(name):
    # The pipeline roles trust repo:<org>/<repo>:environment:<stage> subjects.
    for job_name, job in load_workflow(name)["jobs"].items():
        if assumes_role(job):
            assert environment_name(job) in {"test", "prod"}, job_name


# ------------------------------------------------------------------- pull requests (ci.yaml)
def test_pull_requests_run_what_ci_runs_on_python_313():
    workflow = load_workflow("ci.yaml")
    assert "pull_request" in triggers(workflow)
    [job] = [job for job in workflow["jobs"].values() if ".ci/run" in run_text(job)]
    assert run_text(job).strip().endswith(".ci/run")
    setup = [s for s in steps(job) if s.get("uses", "").startswith("actions/setup-python@")]
    assert setup and str(setup[0]["with"]["python-version"]) == "3.13"
    assert "uv==0.13.8" in run_text(job)
    assert not assumes_role(job)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# ------------------------------------------------------------------- main (pipeline.yaml)
@pytest.fixture(scope="module")
def pipeline() -> dict[str, Any]:
    workflow = load_workflow("pipeline.yaml")
    assert triggers(workflow)["push"]["branches"] == ["main"]
    return workflow["jobs"]


@pytest.fixture(scope="module")
def release() -> dict[str, Any]:
    """The one job of release-prod.yaml: started by a person, nothing else."""
    workflow = load_workflow("release-prod.yaml")
    assert set(triggers(workflow)) == {"workflow_dispatch"}
    [job] = workflow["jobs"].values()
    return job


def deploy_jobs(jobs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: job for name, job in jobs.items() if commands(job, "sam deploy")}


@pytest.fixture(scope="module")
def stage_deploys(pipeline, release) -> dict[str, dict[str, Any]]:
    """stage -> its deploy job: test in the pipeline, prod in the release."""
    deploys = {stage_of(job): job for job in deploy_jobs(pipeline).values()}
    deploys[stage_of(release)] = release
    assert set(deploys) == {"test", "prod"}
    return deploys


def stage_of(job: dict[str, Any]) -> str:
    [deploy] = commands(job, "sam deploy")
    return flag(deploy, "--config-env")


def test_main_runs_make_test_before_building(pipeline):
    [build_name] = [name for name, job in pipeline.items() if builds(job)]
    tested = [name for name, job in pipeline.items() if commands(job, "make test")]
    assert tested and set(tested) <= ancestors(pipeline, build_name)


def test_sam_build_runs_once_and_is_uploaded(pipeline, release):
    building = [name for name, job in pipeline.items() if builds(job)]
    assert len(building) == 1, f"sam build in {building}"
    build = pipeline[building[0]]
    assert not assumes_role(build), "building needs no AWS credentials"
    uploads = [s for s in steps(build) if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["with"]["path"] == ".aws-sam/build"
    artifact = uploads[0]["with"]["name"]
    for name, job in {**deploy_jobs(pipeline), "release": release}.items():
        assert not builds(job), f"{name} must deploy the build, not rebuild"
        downloads = [
            s for s in steps(job) if s.get("uses", "").startswith("actions/download-artifact@")
        ]
        assert [d["with"]["name"] for d in downloads] == [artifact], name
        assert downloads[0]["with"]["path"] == ".aws-sam/build", name
        if job is release:  # the build of the pipeline run being released
            assert downloads[0]["with"]["run-id"] == "${{ inputs.pipeline_run_id }}"
        else:
            assert building[0] in ancestors(pipeline, name)


def test_one_package_per_stage_then_deploy_of_that_package(stage_deploys):
    for stage, job in stage_deploys.items():
        [package] = commands(job, "sam package")
        [deploy] = commands(job, "sam deploy")
        assert flag(package, "--config-env") == flag(deploy, "--config-env") == stage
        assert flag(package, "--template-file") == ".aws-sam/build/template.yaml", stage
        assert flag(deploy, "--template-file") == flag(package, "--output-template-file"), stage
        for command in (package, deploy):
            assert '--s3-bucket "$ARTIFACTS_BUCKET"' in command, stage
            assert '--region "$AWS_REGION"' in command, stage
        assert '--role-arn "$CFN_EXECUTION_ROLE_ARN"' in deploy, stage
        assert "--no-confirm-changeset" in deploy, stage
        assert environment_name(job) == stage, f"{stage}: environment must match the stage"
        assert job["env"]["ARTIFACTS_BUCKET"] == "${{ vars.ARTIFACTS_BUCKET }}", stage


def test_test_then_integration_tests_then_prod(pipeline, stage_deploys, release):
    [test_job] = deploy_jobs(pipeline)
    [integration] = [
        name for name, job in pipeline.items() if commands(job, "pytest tests/integration")
    ]
    assert test_job in ancestors(pipeline, integration)
    job = pipeline[integration]
    env = job["env"]
    assert env["AWS_SAM_STACK_NAME"] == pipeline[test_job]["env"]["STACK_NAME"]
    assert "AWS_ENDPOINT_URL" not in env
    assert "unset AWS_ENDPOINT_URL" in run_text(job)
    assert environment_name(job) == "test" and assumes_role(job)
    # Prod takes only a pipeline run on main that passed every job (the integration tests too),
    # and deploys it with that commit's configuration.
    [check] = [s for s in steps(release) if s.get("id") == "candidate"]
    [checkout] = [s for s in steps(release) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["ref"] == "${{ steps.candidate.outputs.sha }}"
    assert steps(release).index(check) < steps(release).index(checkout)
    assert stage_deploys["test"]["env"]["STACK_NAME"] != release["env"]["STACK_NAME"]


def test_prod_is_deployed_only_by_a_person_in_the_prod_environment(pipeline, release):
    assert environment_name(release) == "prod"
    assert stage_of(release) == "prod"
    for name, job in pipeline.items():
        assert environment_name(job) != "prod", f"{name}: the pipeline never reaches prod"


def test_deploys_of_one_stage_never_overlap(stage_deploys):
    groups = {}
    for stage, job in stage_deploys.items():
        concurrency = job.get("concurrency")
        assert isinstance(concurrency, dict), f"{stage}: no concurrency group"
        assert concurrency["cancel-in-progress"] is False, stage
        assert stage in concurrency["group"], stage
        groups[stage] = concurrency["group"]
    assert len(set(groups.values())) == len(groups), "one group per stage"
    top = load_workflow("pipeline.yaml")["concurrency"]
    assert top["cancel-in-progress"] is False, "never cancel a running deploy"


# -------------------------------------------------------------- feature-branch stacks
def stack_name_step(job: dict[str, Any]) -> dict[str, Any]:
    [step] = [s for s in steps(job) if s.get("id") == "stack"]
    return step


@pytest.fixture(scope="module")
def feature_jobs() -> tuple[dict[str, Any], dict[str, Any]]:
    deploy = load_workflow("feature.yaml")
    cleanup = load_workflow("feature-cleanup.yaml")
    assert triggers(deploy)["push"]["branches"] == ["feature/**"]
    assert "delete" in triggers(cleanup)
    [deploy_job] = deploy["jobs"].values()
    [cleanup_job] = cleanup["jobs"].values()
    return deploy_job, cleanup_job


def test_feature_stacks_are_deployed_and_deleted_under_the_same_name(feature_jobs):
    deploy_job, cleanup_job = feature_jobs
    assert stack_name_step(deploy_job)["run"] == stack_name_step(cleanup_job)["run"]
    assert environment_name(deploy_job) == environment_name(cleanup_job) == "test"
    assert deploy_job["concurrency"]["cancel-in-progress"] is False
    assert commands(deploy_job, "sam deploy") and "--config-env test" in run_text(deploy_job)
    [delete] = commands(cleanup_job, "sam delete")
    assert "--no-prompts" in delete
    assert "feature/" in cleanup_job["if"] and "branch" in cleanup_job["if"]


@pytest.mark.parametrize(
    ("branch", "stack"),
    [
        ("feature/Add_Things.v2", "last-agent-routing-test-feature-add-things-v2"),
        ("feature/a/b--c-", "last-agent-routing-test-feature-a-b-c"),
        ("feature/" + "x" * 60, "last-agent-routing-test-feature-" + "x" * 40),
        ("feature/???", None),
    ],
)
def test_branch_names_are_sanitised(feature_jobs, tmp_path, branch, stack):
    script = stack_name_step(feature_jobs[0])["run"]
    output = tmp_path / "out"
    output.touch()
    env = {**os.environ, "BRANCH": branch, "GITHUB_OUTPUT": str(output)}
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if stack is None:
        assert result.returncode != 0
        return
    assert result.returncode == 0, result.stderr
    values = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert values["name"] == stack
    assert re.fullmatch(r"[a-z][a-z0-9-]{0,127}", values["name"])
    slug = stack.removeprefix("last-agent-routing-test-feature-")
    assert values["s3_prefix"] == f"feature/{slug}"


# ------------------------------------------------------------------ bootstrap template
class CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form intrinsics (!Sub, !If, ...) as their long form."""


def _intrinsic(loader: CfnLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if tag_suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


CfnLoader.add_multi_constructor("!", _intrinsic)


@pytest.fixture(scope="module")
def bootstrap() -> dict[str, Any]:
    return yaml.load(BOOTSTRAP.read_text(), Loader=CfnLoader)  # a SafeLoader subclass


def statements(policy_document: dict[str, Any]) -> list[dict[str, Any]]:
    """Policy statements, with Fn::If [cond, stmt, AWS::NoValue] resolved to stmt."""
    return [
        statement["Fn::If"][1] if "Fn::If" in statement else statement
        for statement in policy_document["Statement"]
    ]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_bootstrap_interface(bootstrap):
    assert {"GitHubOrg", "GitHubRepo", "Stage", "CreateOidcProvider"} <= set(
        bootstrap["Parameters"]
    )
    assert bootstrap["Resources"]["GitHubOidcProvider"]["Condition"] == "CreateOidc"
    assert {"PipelineRoleArn", "CloudFormationExecutionRoleArn", "ArtifactsBucketName"} <= set(
        bootstrap["Outputs"]
    )
    assert bootstrap["Conditions"]["IsProd"] == {"Fn::Equals": [{"Ref": "Stage"}, "prod"]}


SUBJECT = (
    "repo:${GitHubOrg}/${GitHubRepo}:environment:${Stage}"
    ":job_workflow_ref:${GitHubOrg}/${GitHubRepo}/.github/workflows/"
)
SUB = "token.actions.githubusercontent.com:sub"


def trusted_subjects(bootstrap: dict[str, Any], stage: str) -> dict[str, str]:
    """Subject -> the condition operator it is matched with, for the role of that stage."""
    role = bootstrap["Resources"]["PipelineRole"]["Properties"]
    found = {}
    for written in role["AssumeRolePolicyDocument"]["Statement"]:
        statement = written
        if "Fn::If" in written:
            condition, then, _ = written["Fn::If"]
            assert condition == "IsNotProd"
            if stage == "prod":
                continue
            statement = then
        assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
        aud = statement["Condition"]["StringEquals"]["token.actions.githubusercontent.com:aud"]
        assert aud == "sts.amazonaws.com"
        for operator, keys in statement["Condition"].items():
            if SUB not in keys:
                continue
            value = keys[SUB]
            if isinstance(value, dict) and "Fn::If" in value:
                is_prod, prod, other = value["Fn::If"]
                assert is_prod == "IsProd"
                value = prod if stage == "prod" else other
            for subject in as_list(value):
                found[subject["Fn::Sub"]] = operator
    return found


def test_pipeline_role_trusts_each_workflow_for_what_it_runs(bootstrap):
    # prod: release-prod.yaml as on main, nothing else (no name, no tag, no other workflow)
    assert trusted_subjects(bootstrap, "prod") == {
        SUBJECT + "release-prod.yaml@refs/heads/main": "StringEquals"
    }
    # test: main's pipeline and cleanup exactly; feature.yaml on a feature branch (the one
    # wildcard); never the old `ref:refs/heads/main` subject no job presents
    assert trusted_subjects(bootstrap, "test") == {
        SUBJECT + "pipeline.yaml@refs/heads/main": "StringEquals",
        SUBJECT + "feature-cleanup.yaml@refs/heads/main": "StringEquals",
        SUBJECT + "feature.yaml@refs/heads/feature/*": "StringLike",
    }
    # Every job that assumes a role presents a subject (the customised one: repo, context,
    # job_workflow_ref) its environment's role trusts.
    runs_on = {  # the ref each workflow's jobs run for (delete and dispatch: the default branch)
        "pipeline.yaml": "refs/heads/main",
        "feature.yaml": "refs/heads/feature/add-things",
        "feature-cleanup.yaml": "refs/heads/main",
        "release-prod.yaml": "refs/heads/main",
    }
    for name, workflow in all_workflows().items():
        for job in workflow["jobs"].values():
            if not assumes_role(job):
                continue
            subject = f"{SUBJECT}{name}@{runs_on[name]}"
            trusted = trusted_subjects(bootstrap, environment_name(job))
            assert any(
                subject == s if op == "StringEquals" else fnmatch.fnmatchcase(subject, s)
                for s, op in trusted.items()
            ), (name, subject)


def test_pipeline_role_permissions_are_scoped(bootstrap):
    resources = bootstrap["Resources"]
    policy = statements(resources["PipelineRolePolicy"]["Properties"]["PolicyDocument"])
    by_sid = {s["Sid"]: s for s in policy}
    pass_role = by_sid["PassTheExecutionRoleToCloudFormationOnly"]
    assert pass_role["Resource"] == {"Fn::GetAtt": ["CloudFormationExecutionRole", "Arn"]}
    assert pass_role["Condition"]["StringEquals"]["iam:PassedToService"] == (
        "cloudformation.amazonaws.com"
    )
    assert ":stack/${AppName}-${Stage}*/*" in by_sid["DeployTheStageStacks"]["Resource"]["Fn::Sub"]
    change_sets = by_sid["ChangeSetsAsTheExecutionRole"]
    assert change_sets["Action"] == "cloudformation:CreateChangeSet"
    assert change_sets["Resource"][1]["Fn::Sub"].endswith(":aws:transform/Serverless-2016-10-31")
    assert change_sets["Condition"] == {
        "ArnEquals": {
            "cloudformation:RoleArn": {"Fn::GetAtt": ["CloudFormationExecutionRole", "Arn"]}
        }
    }
    granted = [a for s in policy if s["Effect"] == "Allow" for a in as_list(s["Action"])]
    assert granted.count("cloudformation:CreateChangeSet") == 1
    for statement in policy:
        if statement["Effect"] == "Deny":
            assert statement["Sid"] == "NoImports"
            continue
        assert "*" not in as_list(statement["Action"])
        assert "*" not in as_list(statement["Resource"])


def test_execution_role_has_no_blanket_permissions(bootstrap):
    role = bootstrap["Resources"]["CloudFormationExecutionRole"]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "cloudformation.amazonaws.com"
    }
    for policy in role["Policies"]:
        for statement in statements(policy["PolicyDocument"]):
            actions = as_list(statement.get("Action", statement.get("NotAction")))
            assert "*" not in actions
            if statement["Effect"] == "Allow" and "*" in as_list(statement["Resource"]):
                # only actions that have no resource type in IAM; conditioned where IAM allows
                unscoped = {
                    "lambda:ListEventSourceMappings",
                    "kms:CreateKey",
                    "ds:DescribeDirectories",
                }
                assert statement.get("Condition") or set(actions) <= unscoped, statement


def test_artifacts_bucket_is_private_encrypted_versioned_and_tls_only(bootstrap):
    resources = bootstrap["Resources"]
    bucket = resources["ArtifactsBucket"]["Properties"]
    assert bucket["VersioningConfiguration"]["Status"] == "Enabled"
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["LifecycleConfiguration"]["Rules"]
    [tls] = resources["ArtifactsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert tls["Effect"] == "Deny"
    assert tls["Condition"]["Bool"]["aws:SecureTransport"] == "false"


# ------------------------------------------- the execution role can deploy template.yaml
TEMPLATE = ROOT / "template.yaml"

# Resource types (and SAM event types) the execution role's statements are written for, with
# the IAM service prefixes CloudFormation needs for them. A new type in template.yaml fails here
# until pipeline/bootstrap.yaml grants it.
COVERED_TYPES = {
    "AWS::Serverless::Function": {"lambda", "iam"},
    "AWS::Serverless::LayerVersion": {"lambda"},
    "AWS::Lambda::Permission": {"lambda"},
    "AWS::S3::Bucket": {"s3"},
    "AWS::S3::BucketPolicy": {"s3"},
    "AWS::SQS::Queue": {"sqs"},
    "AWS::SQS::QueuePolicy": {"sqs"},
    "AWS::SNS::Topic": {"sns"},
    "AWS::SNS::Subscription": {"sns"},
    "AWS::SNS::TopicPolicy": {"sns"},
    "AWS::DynamoDB::Table": {"dynamodb"},
    "AWS::Logs::LogGroup": {"logs"},
    "AWS::CloudWatch::Alarm": {"cloudwatch"},
    "AWS::CloudWatch::Dashboard": {"cloudwatch"},
    "AWS::KMS::Key": {"kms"},
    "AWS::Lambda::EventSourceMapping": {"lambda"},
    "AWS::Events::EventBus": {"events"},
    "AWS::Events::Rule": {"events"},
    "AWS::Pipes::Pipe": {"pipes", "iam"},
    "AWS::StepFunctions::StateMachine": {"states", "iam"},
    "AWS::IAM::Role": {"iam"},
    # Flow 0: the delivery stream passes its role; Connect's storage config describes the stream
    # and puts a policy on Connect's service-linked role; the association adds the function's
    # invoke permission; Connect's calls read the instance's directory.
    "AWS::KinesisFirehose::DeliveryStream": {"firehose", "iam"},
    "AWS::Logs::LogStream": {"logs"},
    "AWS::Connect::InstanceStorageConfig": {"connect", "firehose", "iam", "ds"},
    "AWS::Connect::IntegrationAssociation": {"connect", "lambda", "ds"},
    "AWS::Connect::ContactFlow": {"connect"},
    # the mail sender's SES resources (the event destination puts SES's events on the default bus)
    "AWS::SES::ConfigurationSet": {"ses"},
    "AWS::SES::ConfigurationSetEventDestination": {"ses"},
    "AWS::SES::Template": {"ses"},
    "AWS::SES::EmailIdentity": {"ses"},
}
COVERED_EVENTS = {"SQS", "DynamoDB"}
NAME_PROPERTIES = (
    "FunctionName",
    "TableName",
    "QueueName",
    "TopicName",
    "RoleName",
    "AlarmName",
    "DashboardName",
    "StateMachineName",
    "DeliveryStreamName",
    "Name",
)
# Log groups are named after the stack under the prefix of the service that writes to them.
LOG_GROUP_PREFIXES = ("/aws/lambda/${AWS::StackName}", "/aws/kinesisfirehose/${AWS::StackName}")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=CfnLoader)  # a SafeLoader subclass


def execution_role_services(bootstrap: dict[str, Any]) -> set[str]:
    role = bootstrap["Resources"]["CloudFormationExecutionRole"]["Properties"]
    return {
        action.split(":", 1)[0]
        for policy in role["Policies"]
        for statement in statements(policy["PolicyDocument"])
        if statement["Effect"] == "Allow"
        for action in as_list(statement["Action"])
    }


def test_execution_role_covers_every_resource_type_in_the_template(bootstrap, template):
    granted = execution_role_services(bootstrap)
    for logical_id, resource in template["Resources"].items():
        kind = resource["Type"]
        assert kind in COVERED_TYPES, (
            f"{logical_id}: {kind} is not covered by the execution role in pipeline/bootstrap.yaml"
        )
        assert COVERED_TYPES[kind] <= granted, logical_id
        for event in (resource.get("Properties", {}).get("Events") or {}).values():
            assert event["Type"] in COVERED_EVENTS, f"{logical_id}: event {event['Type']}"


def test_explicit_resource_names_start_with_the_stack_name(template):
    # Permissions are scoped to <AppName>-<Stage>*: named resources must keep that prefix.
    for logical_id, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        for prop in NAME_PROPERTIES:
            if prop not in properties:
                continue
            name = properties[prop]
            if isinstance(name, dict) and ("Fn::GetAtt" in name or "Ref" in name):
                continue  # a reference to another resource's name, not a new name
            sub = name.get("Fn::Sub") if isinstance(name, dict) else None
            text = sub if isinstance(sub, str) else None
            assert text and text.startswith("${AWS::StackName}"), f"{logical_id}.{prop}"
        log_group = properties.get("LogGroupName")
        if log_group is not None and "Fn::Sub" in log_group:  # not a Ref to the stack's group
            assert log_group["Fn::Sub"].startswith(LOG_GROUP_PREFIXES), logical_id


# ------------------------------------------------ the execution role and the boundary
ACCOUNT = "111111111111"
PARAMETERS = {
    "AWS::Partition": "aws",
    "AWS::Region": "eu-west-1",
    "AWS::AccountId": ACCOUNT,
    "AppName": "last-agent-routing",
    "Stage": "test",
}
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/last-agent-routing-test-permissions-boundary"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/last-agent-routing-test-IngestFunctionRole-ABC123"


def resolved(value: Any, resources: dict[str, str]) -> Any:
    """The bootstrap's intrinsics as CloudFormation resolves them for a test stage (Ref/GetAtt
    of its own resources: the ARNs given)."""
    if isinstance(value, list):
        items = [resolved(v, resources) for v in value]
        return [i for i in items if i != "AWS::NoValue"]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        name = value["Ref"]
        return "AWS::NoValue" if name == "AWS::NoValue" else {**PARAMETERS, **resources}[name]
    if "Fn::GetAtt" in value:
        return resources[".".join(value["Fn::GetAtt"])]
    if "Fn::Sub" in value:
        text = value["Fn::Sub"]
        names = {**PARAMETERS, **resources}
        return re.sub(r"\$\{([^}]+)\}", lambda m: names[m[1]], text)
    if "Fn::If" in value:
        condition, then, otherwise = value["Fn::If"]
        holds = {"IsProd": False, "IsNotProd": True, "CreateOidc": True}[condition]
        return resolved(then if holds else otherwise, resources)
    return {k: resolved(v, resources) for k, v in value.items()}


@pytest.fixture(scope="module")
def execution_role(bootstrap) -> list[Policy]:
    resources = {
        "ApplicationPermissionsBoundary": BOUNDARY,
        "ArtifactsBucket.Arn": "arn:aws:s3:::artifacts",
        "CloudFormationExecutionRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/pipeline/exec",
    }
    role = bootstrap["Resources"]["CloudFormationExecutionRole"]["Properties"]
    return [
        Policy.parse(p["PolicyName"], resolved(p["PolicyDocument"], resources))
        for p in role["Policies"]
    ]


def allowed(policies: list[Policy], action: str, resource: str, **context: str) -> bool:
    request = Request(action, resource, {k.replace("_", ":", 1): [v] for k, v in context.items()})
    return evaluate(policies, request).allowed


# The tag the stack's tags put on every role the execution role creates (sam deploy --tags).
BOUNDARY_TAG = "permissions-boundary"
TAGGED = {f"aws_ResourceTag/{BOUNDARY_TAG}": "last-agent-routing-test-permissions-boundary"}
ADMIN = "arn:aws:iam::aws:policy/AdministratorAccess"
SAM_LOGS = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def test_the_execution_role_creates_and_changes_roles_only_with_the_boundary(execution_role):
    with_boundary = {"iam_PermissionsBoundary": BOUNDARY}
    other = {"iam_PermissionsBoundary": f"arn:aws:iam::{ACCOUNT}:policy/anything-goes"}
    for action in ("iam:CreateRole", "iam:PutRolePolicy", "iam:UpdateAssumeRolePolicy"):
        assert allowed(execution_role, action, ROLE, **with_boundary), action
        assert not allowed(execution_role, action, ROLE), f"{action} without a boundary"
        assert not allowed(execution_role, action, ROLE, **other), f"{action}, another boundary"
    # only the managed policies SAM attaches, and only to a role with the boundary
    assert allowed(
        execution_role, "iam:AttachRolePolicy", ROLE, iam_PolicyARN=SAM_LOGS, **with_boundary
    )
    assert not allowed(
        execution_role, "iam:AttachRolePolicy", ROLE, iam_PolicyARN=ADMIN, **with_boundary
    )
    assert not allowed(execution_role, "iam:AttachRolePolicy", ROLE, iam_PolicyARN=SAM_LOGS)
    # the boundary stays: never removed, never replaced, its policy never edited
    assert not allowed(execution_role, "iam:DeleteRolePermissionsBoundary", ROLE)
    assert not allowed(execution_role, "iam:PutRolePermissionsBoundary", ROLE, **other)
    for action in ("iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion", "iam:DeletePolicy"):
        assert not allowed(execution_role, action, BOUNDARY), action
    # and never outside the stage's names (the bootstrap's own roles live under /pipeline/)
    pipeline_role = f"arn:aws:iam::{ACCOUNT}:role/pipeline/last-agent-routing-pipeline-test-X"
    assert not allowed(execution_role, "iam:PutRolePolicy", pipeline_role, **with_boundary)


def test_the_execution_role_manages_the_stages_state_machine_only(execution_role):
    stage = "last-agent-routing-test"
    machine = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:{stage}-changes"
    other = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:last-agent-routing-prod-changes"
    for action in (
        "states:CreateStateMachine",
        "states:UpdateStateMachine",
        "states:DeleteStateMachine",
    ):
        assert allowed(execution_role, action, machine), action
        assert not allowed(execution_role, action, other), action
    assert not allowed(execution_role, "states:StartExecution", machine)  # the stack runs it
    role = f"arn:aws:iam::{ACCOUNT}:role/{stage}-ChangeMachineRole-X"
    passed_to = "iam_PassedToService"
    assert allowed(
        execution_role, "iam:PassRole", role, **{passed_to: "states.amazonaws.com"}, **TAGGED
    )
    assert not allowed(
        execution_role, "iam:PassRole", role, **{passed_to: "ec2.amazonaws.com"}, **TAGGED
    )


STAGE = "last-agent-routing-test"
INSTANCE = f"arn:aws:connect:eu-west-1:{ACCOUNT}:instance/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
CONNECT_ROLE = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/connect.amazonaws.com/"
    "AWSServiceRoleForAmazonConnect_AbC123"
)


FIREHOSE_LOGS = f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/kinesisfirehose"


def stage_name(sub: str) -> str:
    """A template name (Fn::Sub on ${AWS::StackName}) as the test stage's stack has it."""
    return sub.replace("${AWS::StackName}", STAGE)


def test_the_execution_role_creates_the_templates_log_groups_and_delivery_streams(
    execution_role, template
):
    # Derived from template.yaml: every named log group and delivery stream, at its stage name.
    arns = {
        "LogGroupName": ("logs:CreateLogGroup", f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:"),
        "DeliveryStreamName": (
            "firehose:CreateDeliveryStream",
            f"arn:aws:firehose:eu-west-1:{ACCOUNT}:deliverystream/",
        ),
    }
    checked = set()
    for logical_id, resource in template["Resources"].items():
        for prop, (action, prefix) in arns.items():
            name = resource.get("Properties", {}).get(prop)
            if isinstance(name, dict) and isinstance(name.get("Fn::Sub"), str):
                arn = prefix + stage_name(name["Fn::Sub"])
                assert allowed(execution_role, action, arn), (logical_id, arn)
                other = arn.replace(STAGE, "last-agent-routing-prod")
                assert not allowed(execution_role, action, other), (logical_id, other)
                checked.add(prop)
    assert checked == set(arns)


def test_the_execution_role_deploys_the_delivery_stream_of_the_stage_only(execution_role):
    stream = f"arn:aws:firehose:eu-west-1:{ACCOUNT}:deliverystream/{STAGE}-contact-records"
    other = f"arn:aws:firehose:eu-west-1:{ACCOUNT}:deliverystream/last-agent-routing-prod-x"
    for action in (
        "firehose:CreateDeliveryStream",
        "firehose:DescribeDeliveryStream",
        "firehose:UpdateDestination",
        "firehose:DeleteDeliveryStream",
        "firehose:StartDeliveryStreamEncryption",
        "firehose:StopDeliveryStreamEncryption",
        "firehose:TagDeliveryStream",
        "firehose:UntagDeliveryStream",
        "firehose:ListTagsForDeliveryStream",
    ):
        assert allowed(execution_role, action, stream), action
        assert not allowed(execution_role, action, other), action
    assert not allowed(execution_role, "firehose:PutRecord", stream)  # Connect puts, not CFN
    role = f"arn:aws:iam::{ACCOUNT}:role/{STAGE}-ContactRecordsDeliveryRole-X"
    passed_to = "iam_PassedToService"
    assert allowed(
        execution_role, "iam:PassRole", role, **{passed_to: "firehose.amazonaws.com"}, **TAGGED
    )
    assert not allowed(
        execution_role, "iam:PassRole", role, **{passed_to: "ec2.amazonaws.com"}, **TAGGED
    )
    group = f"{FIREHOSE_LOGS}/{STAGE}-contact-records"
    assert allowed(execution_role, "logs:CreateLogGroup", group)
    assert allowed(
        execution_role, "logs:CreateLogStream", f"{group}:log-stream:DestinationDelivery"
    )
    other_group = group.replace(STAGE, "last-agent-routing-prod")
    assert not allowed(execution_role, "logs:DeleteLogGroup", other_group)


def test_the_execution_role_configures_connect_for_contact_records_and_flows(execution_role):
    kind = "connect_StorageResourceType"
    for action in ("connect:AssociateInstanceStorageConfig", "connect:UpdateInstanceStorageConfig"):
        assert allowed(execution_role, action, INSTANCE, **{kind: "CONTACT_TRACE_RECORDS"})
        assert not allowed(execution_role, action, INSTANCE, **{kind: "CALL_RECORDINGS"}), action
    flow = f"{INSTANCE}/contact-flow/9a8b7c6d"
    association = f"{INSTANCE}/integration-association/5e4f3a2b"
    ok = [
        ("connect:DescribeInstance", INSTANCE),
        ("connect:DescribeInstanceStorageConfig", INSTANCE),
        ("connect:ListInstanceStorageConfigs", INSTANCE),
        ("connect:DisassociateInstanceStorageConfig", INSTANCE),
        ("connect:CreateIntegrationAssociation", INSTANCE),
        ("connect:DeleteIntegrationAssociation", association),
        ("connect:ListIntegrationAssociations", INSTANCE),
        ("connect:AssociateLambdaFunction", INSTANCE),
        ("connect:DisassociateLambdaFunction", INSTANCE),
        ("connect:CreateContactFlow", flow),
        ("connect:DescribeContactFlow", flow),
        ("connect:UpdateContactFlowContent", flow),
        ("connect:UpdateContactFlowMetadata", flow),
        ("connect:DeleteContactFlow", flow),
        ("connect:TagResource", flow),
        ("connect:UntagResource", flow),
        ("ds:DescribeDirectories", "*"),
        # Connect's dependent actions on the stage's own stream and function
        (
            "firehose:DescribeDeliveryStream",
            f"arn:aws:firehose:eu-west-1:{ACCOUNT}:deliverystream/{STAGE}-contact-records",
        ),
        ("lambda:RemovePermission", f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{STAGE}-Route-X"),
    ]
    route = f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{STAGE}-Route-X"
    assert allowed(
        execution_role, "lambda:AddPermission", route, lambda_Principal="connect.amazonaws.com"
    )
    refused = [
        ("connect:DeleteInstance", INSTANCE),
        ("connect:UpdateInstanceAttribute", INSTANCE),
        (
            "connect:CreateContactFlow",
            INSTANCE.replace("eu-west-1", "us-east-1") + "/contact-flow/x",
        ),
        ("connect:TagResource", INSTANCE),  # flows only
        ("connect:CreateQueue", f"{INSTANCE}/queue/x"),
        ("connect:UpdateUserRoutingProfile", f"{INSTANCE}/agent/x"),
        ("connect:StartOutboundVoiceContact", f"{INSTANCE}/contact/x"),
    ]
    for action, resource in ok:
        assert allowed(execution_role, action, resource), (action, resource)
    for action, resource in refused:
        assert not allowed(execution_role, action, resource), (action, resource)


def test_connects_service_linked_role_is_the_one_role_policy_without_the_boundary(execution_role):
    # AssociateInstanceStorageConfig asks the caller for iam:PutRolePolicy on Connect's role,
    # which carries no boundary; nothing else is allowed on it, and no other role escapes.
    assert allowed(execution_role, "iam:PutRolePolicy", CONNECT_ROLE)
    for action in (
        "iam:CreateRole",
        "iam:AttachRolePolicy",
        "iam:UpdateAssumeRolePolicy",
        "iam:DeleteRolePermissionsBoundary",
        "iam:PassRole",
    ):
        assert not allowed(execution_role, action, CONNECT_ROLE), action
    elsewhere = [
        f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/lambda.amazonaws.com/AWSServiceRoleForX",
        f"arn:aws:iam::{ACCOUNT}:role/AWSServiceRoleForAmazonConnect_AbC123",
        ROLE,
    ]
    for role in elsewhere:
        assert not allowed(execution_role, "iam:PutRolePolicy", role), role


def template_value(value: Any, stack_suffix: str, resources: dict[str, Any]) -> Any:
    """A role policy's intrinsics of template.yaml as CloudFormation resolves them for the test
    stage (the stack id's suffix given; GetAtt of a log group: its ARN, from its name)."""
    if isinstance(value, list):
        return [template_value(v, stack_suffix, resources) for v in value]
    if not isinstance(value, dict):
        return value
    names = {**PARAMETERS, "AWS::StackName": STAGE, "StackSuffix": stack_suffix}
    if "Fn::Sub" in value:
        text, extra = (
            (value["Fn::Sub"], {}) if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"]
        )
        assert set(extra) <= {"StackSuffix"}, extra  # the bucket's name, as it names itself
        return re.sub(r"\$\{([^}]+)\}", lambda m: names[m[1]], text)
    if "Fn::GetAtt" in value:
        [logical_id, attribute] = value["Fn::GetAtt"]
        group = resources[logical_id]
        assert group["Type"] == "AWS::Logs::LogGroup" and attribute == "Arn", value
        name = stage_name(group["Properties"]["LogGroupName"]["Fn::Sub"])
        return f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:{name}:*"
    return {k: template_value(v, stack_suffix, resources) for k, v in value.items()}


def test_the_boundary_covers_the_delivery_roles_grants(bootstrap, template):
    # Derived from template.yaml: every action the delivery role's policy grants, on every
    # resource it names (a log group's ARN and the log stream in it), is within the boundary.
    boundary = bootstrap["Resources"]["ApplicationPermissionsBoundary"]["Properties"]
    policy = Policy.parse("boundary", resolved(boundary["PolicyDocument"], {}))
    role = template["Resources"]["ContactRecordsDeliveryRole"]["Properties"]
    assert "PermissionsBoundary" in role
    bucket = f"contacts-{ACCOUNT}-eu-west-1-1a2b3c4d"
    granted = 0
    for written in role["Policies"]:
        document = template_value(written["PolicyDocument"], "1a2b3c4d", template["Resources"])
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    # a key under a prefix; a log group's ARN (":*") and a stream in it
                    arns = {resource.replace("/*", "/x"), resource.replace(":*", ":log-stream:x")}
                    for arn in arns:
                        assert evaluate([policy], Request(action, arn)).allowed, (action, arn)
                        granted += 1
    assert granted >= 9
    # and only there: not another bucket's parts, not another stage's stream log
    refused = [
        ("s3:AbortMultipartUpload", f"arn:aws:s3:::{bucket}/incoming/x"),
        ("s3:ListBucketMultipartUploads", "arn:aws:s3:::another-bucket"),
        ("s3:DeleteObject", f"arn:aws:s3:::{bucket}/contact-records/x"),
        ("logs:PutLogEvents", f"{FIREHOSE_LOGS}/last-agent-routing-prod-x:log-stream:x"),
        ("logs:DeleteLogGroup", f"{FIREHOSE_LOGS}/{STAGE}-contact-records"),
        ("firehose:PutRecord", f"arn:aws:firehose:eu-west-1:{ACCOUNT}:deliverystream/{STAGE}-x"),
    ]
    for action, resource in refused:
        assert not evaluate([policy], Request(action, resource)).allowed, (action, resource)


def test_the_boundary_allows_no_iam_sts_or_lambda_and_only_the_stages_resources(bootstrap):
    boundary = bootstrap["Resources"]["ApplicationPermissionsBoundary"]["Properties"]
    policy = Policy.parse("boundary", resolved(boundary["PolicyDocument"], {}))
    stage = "last-agent-routing-test"
    ok = [
        ("dynamodb:PutItem", f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/{stage}-ContactsTable-X"),
        ("sqs:ReceiveMessage", f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{stage}-IngestQueue-X"),
        ("sns:Publish", f"arn:aws:sns:eu-west-1:{ACCOUNT}:{stage}-notifications.fifo"),
        ("events:PutEvents", f"arn:aws:events:eu-west-1:{ACCOUNT}:event-bus/{stage}-changes"),
        (
            "states:StartSyncExecution",
            f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:{stage}-changes",
        ),
        ("xray:PutTraceSegments", "*"),
    ]
    refused = [
        ("iam:CreateRole", f"arn:aws:iam::{ACCOUNT}:role/{stage}-x"),
        ("iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/{stage}-x"),
        ("sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/admin"),
        ("lambda:InvokeFunction", f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{stage}-X"),
        ("dynamodb:Scan", f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/other-app"),
        ("sqs:ReceiveMessage", f"arn:aws:sqs:eu-west-1:{ACCOUNT}:last-agent-routing-prod-Q"),
        ("sns:Subscribe", f"arn:aws:sns:eu-west-1:{ACCOUNT}:{stage}-notifications.fifo"),
        ("states:StartExecution", f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:{stage}-x"),
        ("states:StartSyncExecution", f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:other"),
    ]
    for action, resource in ok:
        assert evaluate([policy], Request(action, resource)).allowed, action
    for action, resource in refused:
        assert not evaluate([policy], Request(action, resource)).allowed, (action, resource)


def test_the_execution_role_is_assumed_for_the_stages_stacks_only(bootstrap):
    role = bootstrap["Resources"]["CloudFormationExecutionRole"]["Properties"]
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"].endswith(
        ":stack/${AppName}-${Stage}*/*"
    )
    # the bootstrap's roles sit under /pipeline/: role/<AppName>-<Stage>* never matches them
    for name in ("PipelineRole", "CloudFormationExecutionRole"):
        assert bootstrap["Resources"][name]["Properties"]["Path"] == "/pipeline/"


# Issue 43, item 6: trusted by name, never by path (anyone who may create a role may create one
# under /pipeline/).
BOOTSTRAP_ROLES = {
    "PipelineRole": "${AppName}-pipeline-${Stage}-PipelineRole",
    "CloudFormationExecutionRole": "${AppName}-pipeline-${Stage}-CloudFormationExecutionRole",
}


def test_the_bootstraps_two_roles_have_names_and_nothing_trusts_a_path(bootstrap):
    for logical_id, name in BOOTSTRAP_ROLES.items():
        role = bootstrap["Resources"][logical_id]["Properties"]
        assert role["RoleName"] == {"Fn::Sub": name}, logical_id
        # at most 64 characters with the longest AppName (19) and Stage (6)
        assert len(name.replace("${AppName}", "a" * 19).replace("${Stage}", "s" * 6)) <= 64
        # never the application's role/<AppName>-<Stage>* names
        assert not name.startswith("${AppName}-${Stage}")
    texts = [BOOTSTRAP.read_text()] + [p.read_text() for p in sorted(WORKFLOWS.glob("*.yaml"))]
    for text in texts:
        assert not re.search(r"role/pipeline/\*", text)
    # the docs deploy the bootstrap with the capability a role name takes
    for doc in (ROOT / "docs" / "deploy.md", ROOT / "pipeline" / "README.md"):
        for command in re.findall(
            r"--template-file pipeline/bootstrap.yaml[^`]*?--capabilities \S+", doc.read_text()
        ):
            assert command.endswith("CAPABILITY_NAMED_IAM"), (doc, command)


def topic_policy_pipeline_principals(template: dict[str, Any]) -> list[Any]:
    found = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::SNS::TopicPolicy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == "OnlyThePipelineSubscribesAndConfigures":
                found.append(statement["Condition"])
    return found


def test_the_topic_policies_name_the_bootstraps_two_roles(template):
    conditions = topic_policy_pipeline_principals(template)
    assert len(conditions) == 2
    prefix = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/pipeline/"
    wanted = {prefix + name for name in BOOTSTRAP_ROLES.values()}
    for condition in conditions:
        assert set(condition) == {"ArnNotEquals"}, condition
        named = {arn["Fn::Sub"] for arn in as_list(condition["ArnNotEquals"]["aws:PrincipalArn"])}
        assert named == wanted
    assert {"AppName", "Stage"} <= set(template["Parameters"])


# Issue 43, item 7: a role is passed only while it carries the tag the stack's tags put on the
# roles the execution role creates with the boundary.
def test_roles_are_passed_only_with_the_boundary_tag(execution_role):
    role = f"arn:aws:iam::{ACCOUNT}:role/{STAGE}-IngestFunctionRole-X"
    other_value = {f"aws_ResourceTag/{BOUNDARY_TAG}": "anything-goes"}
    for service in ("lambda", "pipes", "states", "firehose"):
        passed = {"iam_PassedToService": f"{service}.amazonaws.com"}
        assert allowed(execution_role, "iam:PassRole", role, **passed, **TAGGED), service
        # a role of the stage's name someone else made: no tag, or another value
        assert not allowed(execution_role, "iam:PassRole", role, **passed), service
        assert not allowed(execution_role, "iam:PassRole", role, **passed, **other_value)
    # the execution role tags roles with it only naming its own boundary
    keys = {"aws_TagKeys": BOUNDARY_TAG}
    value = {f"aws_RequestTag/{BOUNDARY_TAG}": "last-agent-routing-test-permissions-boundary"}
    assert allowed(execution_role, "iam:TagRole", role, **keys, **value)
    assert allowed(execution_role, "iam:TagRole", role, aws_TagKeys="team")
    wrong = {f"aws_RequestTag/{BOUNDARY_TAG}": "anything-goes"}
    assert not allowed(execution_role, "iam:TagRole", role, **keys, **wrong)
    assert not allowed(
        execution_role, "iam:CreateRole", role, iam_PermissionsBoundary=BOUNDARY, **keys, **wrong
    )


def test_the_deploys_tag_the_stack_with_the_stages_boundary(stage_deploys):
    samconfig = (ROOT / "samconfig.toml").read_text()
    [feature] = load_workflow("feature.yaml")["jobs"].values()
    for stage, job in {**stage_deploys, "feature": feature}.items():
        [deploy] = commands(job, "sam deploy")
        env = flag(deploy, "--config-env")
        [overrides] = re.findall(
            rf"^\[{env}\.deploy\.parameters\][^\[]*?parameter_overrides = \"([^\"]*)\"",
            samconfig,
            re.MULTILINE | re.DOTALL,
        )
        [boundary] = re.findall(r"PermissionsBoundary=(\S+)", overrides)
        assert f"--tags {BOUNDARY_TAG}={boundary}" in deploy, (stage, deploy)


def test_the_pipeline_role_imports_nothing(bootstrap):
    resources = {
        "ArtifactsBucket.Arn": "arn:aws:s3:::artifacts",
        "CloudFormationExecutionRole.Arn": f"arn:aws:iam::{ACCOUNT}:role/pipeline/exec",
    }
    document = bootstrap["Resources"]["PipelineRolePolicy"]["Properties"]["PolicyDocument"]
    policy = [Policy.parse("pipeline", resolved(document, resources))]
    stack = f"arn:aws:cloudformation:eu-west-1:{ACCOUNT}:stack/{STAGE}/1"
    role_arn = {"cloudformation_RoleArn": resources["CloudFormationExecutionRole.Arn"]}
    assert allowed(policy, "cloudformation:CreateChangeSet", stack, **role_arn)
    importing = {"cloudformation_ImportResourceTypes": "AWS::IAM::Role"}
    assert not allowed(policy, "cloudformation:CreateChangeSet", stack, **role_arn, **importing)


def test_the_execution_role_tags_and_describes_only_the_stages_keys(execution_role):
    key = f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    own = {"aws_ResourceTag/aws:cloudformation:stack-name": STAGE}
    other = {"aws_ResourceTag/aws:cloudformation:stack-name": "another-app"}
    for action in ("kms:TagResource", "kms:UntagResource", "kms:UpdateKeyDescription"):
        assert allowed(execution_role, action, key, **own), action
        assert not allowed(execution_role, action, key, **other), action
        assert not allowed(execution_role, action, key), action  # a key of no stack
    # CreateKey's tags: the new key carries none yet; the request names the stage's stack
    creating = {"aws_RequestTag/aws:cloudformation:stack-name": STAGE}
    assert allowed(execution_role, "kms:TagResource", key, **creating)
    elsewhere = {"aws_RequestTag/aws:cloudformation:stack-name": "another-app"}
    assert not allowed(execution_role, "kms:TagResource", key, **elsewhere)


# Issue 43, item 8: no stage data out through resource policies the template does not declare.
def test_the_execution_role_adds_no_resource_policy_the_template_does_not_need(
    execution_role, template
):
    function = f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{STAGE}-RouteFunction-X"
    table = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/{STAGE}-ContactsTable-X"
    queue = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{STAGE}-IngestQueue-X"
    topic = f"arn:aws:sns:eu-west-1:{ACCOUNT}:{STAGE}-notifications.fifo"
    refused = [
        ("lambda:AddPermission", function, {"lambda_Principal": "*"}),
        ("lambda:AddPermission", function, {"lambda_Principal": "222222222222"}),
        ("lambda:AddPermission", function, {"lambda_FunctionUrlAuthType": "NONE"}),
        ("lambda:CreateFunctionUrlConfig", function, {"lambda_FunctionUrlAuthType": "NONE"}),
        ("lambda:UpdateFunctionUrlConfig", function, {"lambda_FunctionUrlAuthType": "NONE"}),
        ("dynamodb:PutResourcePolicy", table, {}),
        ("sqs:AddPermission", queue, {}),
        ("sns:AddPermission", topic, {}),
    ]
    for action, resource, context in refused:
        assert not allowed(execution_role, action, resource, **context), (action, context)
    # what the template declares still deploys: queue and topic policies, Connect's permission
    assert allowed(execution_role, "sqs:SetQueueAttributes", queue)
    assert allowed(execution_role, "sns:SetTopicAttributes", topic)
    assert allowed(
        execution_role, "lambda:AddPermission", function, lambda_Principal="connect.amazonaws.com"
    )
    # and the template declares nothing the denies would refuse
    kinds = {resource["Type"] for resource in template["Resources"].values()}
    assert not kinds & {"AWS::Lambda::Url", "AWS::DynamoDB::ResourcePolicy"}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Lambda::Permission":
            assert resource["Properties"]["Principal"] == "connect.amazonaws.com"
        properties = resource.get("Properties", {})
        assert "FunctionUrlConfig" not in properties and "ResourcePolicy" not in properties


def test_no_role_of_the_stage_lets_data_out_through_a_resource_policy(bootstrap):
    boundary = bootstrap["Resources"]["ApplicationPermissionsBoundary"]["Properties"]
    policy = Policy.parse("boundary", resolved(boundary["PolicyDocument"], {}))
    queue = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:{STAGE}-IngestQueue-X"
    table = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/{STAGE}-ContactsTable-X"
    function = f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:{STAGE}-RouteFunction-X"
    refused = [
        ("sqs:SetQueueAttributes", queue),
        ("sqs:AddPermission", queue),
        ("dynamodb:PutResourcePolicy", table),
        ("dynamodb:ExportTableToPointInTime", table),
        ("lambda:AddPermission", function),
        ("lambda:CreateFunctionUrlConfig", function),
        ("iam:UpdateAssumeRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/{STAGE}-x"),
    ]
    for action, resource in refused:
        assert not evaluate([policy], Request(action, resource)).allowed, action
    # what the functions do with them stays allowed
    for action, resource in (
        ("sqs:SendMessage", queue),
        ("sqs:ReceiveMessage", queue),
        ("sqs:GetQueueAttributes", queue),
        ("dynamodb:TransactWriteItems", table),
    ):
        assert evaluate([policy], Request(action, resource)).allowed, action


# ------------------------------------------------------------- the prod release gate
GATE_REPO = "octo/last-agent-routing"
RUN = {
    "path": ".github/workflows/pipeline.yaml",
    "repository": GATE_REPO,
    "head_repository": GATE_REPO,
    "head_branch": "main",
    "event": "push",
    "conclusion": "success",
    "head_sha": "a" * 40,
}
MAIN_SHA = "b" * 40

FAKE_GH = """#!/usr/bin/env python3
# `gh api <path> --jq <expr>`: GitHub's answer for <path> from $GH_ANSWERS (no network here).
import json, os, sys
print(json.load(open(os.environ["GH_ANSWERS"]))[sys.argv[2]])
"""


NEWEST_GREEN = (
    f"repos/{GATE_REPO}/actions/workflows/pipeline.yaml/runs"
    "?branch=main&event=push&status=success&per_page=1"
)


def run_gate(
    release: dict[str, Any],
    tmp_path: Path,
    run: dict[str, str],
    status: str,
    newest: str | None = None,
    rollback: str = "false",
):
    [check] = [s for s in steps(release) if s.get("id") == "candidate"]
    fields = "\t".join(run[k] for k in RUN)
    answers = {
        f"repos/{GATE_REPO}/actions/runs/42": fields,
        f"repos/{GATE_REPO}/git/ref/heads/main": MAIN_SHA,
        f"repos/{GATE_REPO}/compare/{MAIN_SHA}...{run['head_sha']}": status,
        NEWEST_GREEN: newest or run["head_sha"],  # the run itself is the newest green one
    }
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir()
    gh.write_text(FAKE_GH)
    gh.chmod(0o755)
    output, summary = tmp_path / "out", tmp_path / "summary"
    env = {
        **os.environ,
        "PATH": f"{gh.parent}:{os.environ['PATH']}",
        "GH_ANSWERS": str(tmp_path / "answers.json"),
        "GITHUB_REPOSITORY": GATE_REPO,
        "PIPELINE_RUN_ID": "42",
        "ROLLBACK": rollback,
        "STACK_NAME": "last-agent-routing-prod",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    result = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", check["run"]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    released = output.read_text() if output.exists() else ""
    return result, released


@pytest.mark.parametrize("status", ["identical", "behind"])
def test_the_release_gate_passes_a_green_pipeline_run_of_a_commit_on_main(
    release, tmp_path, status
):
    result, released = run_gate(release, tmp_path, RUN, status)
    assert result.returncode == 0, result.stdout + result.stderr
    assert released == f"sha={RUN['head_sha']}\n"


@pytest.mark.parametrize(
    ("change", "status", "why"),
    [
        # a workflow *named* pipeline in another file
        ({"path": ".github/workflows/evil.yaml"}, "behind", "pipeline.yaml"),
        # a run of a fork's code
        ({"head_repository": "mallory/last-agent-routing"}, "behind", "pipeline.yaml"),
        # a push to a tag named main (head_branch "main") of an unreviewed commit
        ({}, "diverged", "not in the history of main"),
        ({}, "ahead", "not in the history of main"),
        ({"conclusion": "failure"}, "behind", "pipeline.yaml"),
        ({"event": "workflow_dispatch"}, "behind", "pipeline.yaml"),
    ],
)
def test_the_release_gate_refuses_what_main_never_reviewed(release, tmp_path, change, status, why):
    result, released = run_gate(release, tmp_path, RUN | change, status)
    assert result.returncode != 0
    assert why in result.stdout
    assert released == ""


# ------------------------------------------------------- hash-locked layer and deploy tools
MAKEFILE = ROOT / "Makefile"


def locked(path: Path) -> dict[str, list[str]]:
    """A hash lock: requirement -> its hashes."""
    found: dict[str, list[str]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip().rstrip("\\").strip()
        if not line:
            continue
        if line.startswith("--hash="):
            found[current].append(line.removeprefix("--hash="))
        else:
            current = line
            found[current] = []
    return found


def make_variable(name: str) -> str:
    [value] = re.findall(rf"^{name} := (\S+)$", MAKEFILE.read_text(), re.MULTILINE)
    return value


@pytest.mark.parametrize(
    ("lock", "pin"),
    [
        ("layers/shared/requirements.txt", "aws-lambda-powertools==POWERTOOLS_VERSION"),
        ("pipeline/deploy-tools.txt", "aws-sam-cli==SAM_CLI_VERSION"),
        ("pipeline/uv.txt", "uv==UV_VERSION"),
    ],
)
def test_what_ships_and_what_deploys_is_locked_with_hashes(lock, pin):
    requirements = locked(ROOT / lock)
    name, variable = pin.split("==")
    assert f"{name}=={make_variable(variable)}" in requirements  # `make locks` writes these
    for requirement, hashes in requirements.items():
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[^\s=]+", requirement), requirement
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), requirement


def test_jobs_that_hold_a_role_install_only_hash_locked_tools():
    for name, workflow in all_workflows().items():
        for job_name, job in workflow["jobs"].items():
            if not assumes_role(job):
                continue
            script = run_text(job)
            installs = [line for line in script.splitlines() if "pip install" in line]
            assert installs, (name, job_name)
            for line in installs:
                assert "--require-hashes" in line and "-r pipeline/uv.txt" in line, (name, line)
            if commands(job, "sam deploy") or commands(job, "sam delete"):
                # the deploy jobs: the SAM CLI alone, from its lock; no test environment
                assert "make deploy-tools" in script, (name, job_name)
                assert not re.search(r"make (setup|build)\b|uv sync|uv tool|uv run", script), name
                for line in commands(job, "sam (?:build|package|deploy|delete)"):
                    assert line.startswith(".tools/deploy/bin/sam "), (name, line)
    target = re.search(r"^deploy-tools:.*\n((?:\t.*\n)+)", MAKEFILE.read_text(), re.MULTILINE)
    assert "--require-hashes" in target[1] and "-r pipeline/deploy-tools.txt" in target[1]


# Where an install resolves at run time what it installs: no lock, or a lock without hashes.
UNLOCKED_INSTALLS = (
    (re.compile(r"\bpip install\b"), ("--require-hashes",)),  # pip and uv pip, the same rule
    (re.compile(r"\buv sync\b"), ("--frozen", "--locked")),  # uv.lock's hashes, unchanged
    (re.compile(r"\buv run\b"), ("--no-sync", "--frozen", "--locked")),  # else it may sync
    (re.compile(r"\b(?:uv tool install|uvx|pipx)\b"), None),  # a tool by its top-level pin
)
INSTALLS = re.compile(r"\b(?:pip install|uv sync|uv pip|uv tool|uvx|pipx|make)\b")


def make_prerequisites() -> dict[str, set[str]]:
    """The Makefile's rules: target -> its prerequisites (static pattern rules: the targets'
    own prerequisites, the pattern dropped)."""
    rules: dict[str, set[str]] = {}
    for line in MAKEFILE.read_text().splitlines():
        match = re.match(r"^([a-z][\w% .-]*):(?!=)([^#]*)", line)
        if not match:
            continue
        parts = match[2].split(":")
        prerequisites = {p for p in parts[-1].split() if "%" not in p}
        for target in match[1].split():
            rules.setdefault(target, set()).update(prerequisites)
    return rules


def needs_setup(target: str, rules: dict[str, set[str]]) -> bool:
    """`setup` is the target or among its prerequisites, at any depth."""
    seen, todo = set(), [target]
    while todo:
        current = todo.pop()
        if current == "setup":
            return True
        if current not in seen:
            seen.add(current)
            todo.extend(rules.get(current, ()))
    return False


def unlocked_installs(script: str, rules: dict[str, set[str]]) -> list[str]:
    """The command lines of a step's script that install something not locked with hashes:
    `make setup` or a make target that depends on it, pip/uv pip without --require-hashes,
    uv sync or uv run that may resolve, uv tool install, uvx, pipx."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        for pattern, locked_by in UNLOCKED_INSTALLS:
            if pattern.search(line) and (
                locked_by is None or not any(option in line for option in locked_by)
            ):
                found.append(line.strip())
        for invocation in re.findall(r"\bmake\b([^;&|]*)", line):
            targets = [w for w in invocation.split() if not w.startswith("-") and "=" not in w]
            if any(needs_setup(t, rules) for t in targets or ["help"]):
                found.append(line.strip())
    return found


def uploads_the_build(job: dict[str, Any]) -> bool:
    return any(
        step.get("uses", "").startswith("actions/upload-artifact@")
        and step.get("with", {}).get("path") == ".aws-sam/build"
        for step in steps(job)
    )


def test_make_targets_that_install_by_version_are_known():
    # the rule below reads the Makefile: these depend on setup, these do not
    rules = make_prerequisites()
    for target in ("setup", "build", "integration", "test", "lint", "deploy-rehearsal"):
        assert needs_setup(target, rules), target
    for target in ("deploy-tools", "locks", "help"):
        assert not needs_setup(target, rules), target
    assert unlocked_installs("python -m pip install --quiet uv==0.13.8", rules)
    assert unlocked_installs("uv pip install -r pipeline/deploy-tools.txt", rules)
    assert unlocked_installs("uv tool install checkov==3.3.30", rules)
    assert unlocked_installs("make build", rules)
    assert unlocked_installs("make -C . integration", rules)
    assert unlocked_installs("uv sync", rules)
    assert unlocked_installs("uv run pytest", rules)
    assert not unlocked_installs("pip install --require-hashes --no-deps -r pipeline/uv.txt", rules)
    assert not unlocked_installs("make deploy-tools", rules)
    assert not unlocked_installs("uv sync --frozen --python 3.13", rules)
    assert not unlocked_installs("uv run --no-sync pytest tests/integration", rules)


def test_jobs_that_hold_a_role_or_build_what_ships_install_only_what_is_locked():
    # Issue 43, item 1: the build that test and prod run, and every job with a role's
    # credentials, install nothing by a top-level pin; a role's job installs before it
    # assumes the role, and nothing after.
    rules = make_prerequisites()
    checked = []
    for name, workflow in all_workflows().items():
        for job_name, job in workflow["jobs"].items():
            holds_a_role = job.get("permissions", {}).get("id-token") == "write"
            if not (holds_a_role or uploads_the_build(job)):
                continue
            checked.append((name, job_name))
            for step in steps(job):
                assert not unlocked_installs(step.get("run", ""), rules), (name, job_name, step)
            if not assumes_role(job):
                continue
            names = [s.get("uses", "") for s in steps(job)]
            [credentials] = [i for i, ref in enumerate(names) if ref.startswith(CONFIGURE_AWS)]
            for step in steps(job)[credentials:]:
                assert not INSTALLS.search(step.get("run", "").replace("uv run --no-sync", "")), (
                    f"{name} {job_name}: installs after assuming the role: {step.get('run')}"
                )
    assert ("pipeline.yaml", "build") in checked
    assert ("pipeline.yaml", "integration-test") in checked
    assert ("release-prod.yaml", "deploy-prod") in checked


# Issue 43, item 10: a release of an older build only when the person says rollback.
def test_the_release_gate_releases_an_older_run_only_as_a_rollback(release, tmp_path):
    newer = "c" * 40
    for attempt in ("a", "b"):
        (tmp_path / attempt).mkdir()
    result, released = run_gate(release, tmp_path / "a", RUN, "behind", newest=newer)
    assert result.returncode != 0
    assert "rollback" in result.stdout and newer in result.stdout
    assert released == ""
    result, released = run_gate(
        release, tmp_path / "b", RUN, "behind", newest=newer, rollback="true"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert released == f"sha={RUN['head_sha']}\n"
    # the input is a boolean, off unless the person sets it, and reaches the script by env
    workflow = load_workflow("release-prod.yaml")
    rollback = triggers(workflow)["workflow_dispatch"]["inputs"]["rollback"]
    assert rollback["type"] == "boolean" and rollback["default"] is False
    assert release["env"]["ROLLBACK"] == "${{ inputs.rollback }}"


# Issue 43, item 10: the hash locks Dependabot does not update are refreshed and audited weekly.
LOCKS = (
    "layers/shared/requirements.txt",
    "pipeline/deploy-tools.txt",
    "pipeline/uv.txt",
    "pipeline/audit-tools.txt",
)


def test_the_audit_tool_is_hash_locked_by_make_locks():
    recipe = re.search(r"^locks:.*\n((?:\t.*\n)+)", MAKEFILE.read_text(), re.MULTILINE)[1]
    [pin] = re.findall(r'echo "(pip-audit==[^"]+)".*-o pipeline/audit-tools.txt', recipe)
    requirements = locked(ROOT / "pipeline" / "audit-tools.txt")
    assert pin in requirements
    for requirement, hashes in requirements.items():
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[^\s=]+", requirement), requirement
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), requirement
    for lock in LOCKS:
        assert f"-o {lock}" in recipe, lock
    assert recipe.count("$(UPGRADE)") == len(LOCKS)


def test_the_locks_are_audited_and_refreshed_every_week():
    workflow = load_workflow("locks.yaml")
    assert "schedule" in triggers(workflow)
    [job] = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read"}  # fails instead of pushing
    script = run_text(job)
    assert not unlocked_installs(script, make_prerequisites())
    assert "-r pipeline/audit-tools.txt" in script
    [audit] = [s for s in steps(job) if "pip-audit " in s.get("run", "")]
    for lock in LOCKS:
        assert lock in audit["run"], lock
    assert "uv export" in audit["run"] and "--frozen" in audit["run"]  # uv.lock too
    assert "--strict" in audit["run"]
    [refresh] = [line for line in commands(job, "make locks") if line.startswith("make locks")]
    assert "UPGRADE=--upgrade" in refresh
    names = [s.get("run", "") for s in steps(job)]
    [check] = [i for i, run in enumerate(names) if "git diff --exit-code" in run]
    assert check > names.index(next(r for r in names if "make locks" in r))
    assert "exit 1" in names[check]


def test_the_test_stages_role_patterns_match_the_bootstraps_named_pipeline_role():
    """ContactsKeyUsers (the exports' key) and OperatorRoles (redrives into the queues that admit
    only their producers) of samconfig's test stage name the role the integration tests run as:
    the bootstrap's PipelineRole, by the name it now has (a pattern of its old generated name,
    ``-PipelineRole-*``, matched nothing)."""
    samconfig = (ROOT / "samconfig.toml").read_text()
    overrides = re.search(
        r"\[test\.deploy\.parameters\][^\[]*parameter_overrides = \"([^\"]*)\"", samconfig
    )[1]
    parameters = dict(pair.split("=", 1) for pair in overrides.split())
    name = BOOTSTRAP_ROLES["PipelineRole"].replace("${AppName}", "last-agent-routing")
    role = f"arn:aws:iam::111122223333:role/pipeline/{name.replace('${Stage}', 'test')}"
    for parameter in ("ContactsKeyUsers", "OperatorRoles"):
        patterns = parameters[parameter].split(",")
        assert any(fnmatch.fnmatchcase(role, p) for p in patterns), (parameter, patterns)
