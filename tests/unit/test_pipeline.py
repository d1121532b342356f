"""Shape of the delivery pipeline: the GitHub workflows and the bootstrap template.

Parses .github/workflows/*.yaml and pipeline/bootstrap.yaml (no network, no AWS) and checks the
properties docs/pipeline.md promises: one build, one package per stage, test before prod with the
integration tests in between, prod behind the `prod` environment, OIDC only where a role is
assumed, serialised deploys, pinned actions, and a trust policy scoped to this repository.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    [integration] = [name for name, job in pipeline.items() if commands(job, "make integration")]
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
    assert '"pipeline main push success"' in check["run"]
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


def test_pipeline_role_trusts_only_this_repository(bootstrap):
    role = bootstrap["Resources"]["PipelineRole"]["Properties"]
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert set(trust["Condition"]) == {"StringEquals"}, "no StringLike: no wildcard subjects"
    condition = trust["Condition"]["StringEquals"]
    assert condition["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    is_prod, prod_subjects, other_subjects = condition["token.actions.githubusercontent.com:sub"][
        "Fn::If"
    ]
    assert is_prod == "IsProd"
    subjects = [s["Fn::Sub"] for s in prod_subjects]
    assert subjects == ["repo:${GitHubOrg}/${GitHubRepo}:environment:${Stage}"]
    for subject in [s["Fn::Sub"] for s in other_subjects]:
        assert subject.startswith("repo:${GitHubOrg}/${GitHubRepo}:")
        assert subject.endswith((":environment:${Stage}", ":ref:refs/heads/main"))
        assert "*" not in subject


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
    assert by_sid["UseTheServerlessTransform"]["Resource"]["Fn::Sub"].endswith(
        ":aws:transform/Serverless-2016-10-31"
    )
    for statement in policy:
        assert statement["Effect"] == "Allow"
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
            if "*" in as_list(statement["Resource"]):
                # only actions that have no resource type in IAM; conditioned where IAM allows
                unscoped = {"lambda:ListEventSourceMappings", "kms:CreateKey"}
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
    "AWS::DynamoDB::Table": {"dynamodb"},
    "AWS::Logs::LogGroup": {"logs"},
    "AWS::CloudWatch::Alarm": {"cloudwatch"},
    "AWS::KMS::Key": {"kms"},
    "AWS::Lambda::EventSourceMapping": {"lambda"},
    "AWS::Events::EventBus": {"events"},
    "AWS::Events::Rule": {"events"},
    "AWS::Pipes::Pipe": {"pipes", "iam"},
    "AWS::IAM::Role": {"iam"},
}
COVERED_EVENTS = {"SQS", "DynamoDB"}
NAME_PROPERTIES = (
    "FunctionName",
    "TableName",
    "QueueName",
    "TopicName",
    "RoleName",
    "AlarmName",
    "Name",
)


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
        if log_group is not None:
            assert log_group["Fn::Sub"].startswith("/aws/lambda/${AWS::StackName}"), logical_id
