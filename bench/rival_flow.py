"""P10: the flow end to end on the same work, ours against ministack's, as ratios measured in one
run (issue 47, item 6): P5's and P7's absolute rates move with the machine, a ratio holds on any.

Both stacks deploy the built template (.aws-sam/build, `make bench` builds it first) with
samconfig.toml's default parameters (FanOut=lambda). Ours as `python -m emulator up` on a free
bench port. ministack (bench.rival's RIVAL_VERSION) as `python -m ministack` from an environment
of its own (RIVAL_SAM_ENV: ministack and aws-sam-translator, which its CloudFormation needs for
the SAM transform), the stack made by the unmodified `sam deploy --config-file samconfig.toml`
against its endpoint. ministack's CloudFormation refuses one resource type of the template,
AWS::SES::Template ("Template format error: Unrecognized resource types"): `sam deploy` gets the
template without those resources (CodeUri and ContentUri made absolute, nothing else changed) and
the bench then makes the same templates with SES CreateTemplate, which MailSenderFunction needs.
ministack runs the Python functions in worker processes of its own, without Docker.

The work, the same on each stack, one stack at a time (the other is not running): a warm-up
object of WARM_UP_RECORDS contact records of callers of their own, until its notifications
reached the topic (cold starts are not the load's); then FILES objects of RECORDS_PER_FILE of
P5's contact records put back to back, until P5's done: every contact in the table (the files'
processing logs), every notification the data calls for at a capture queue subscribed to
NotificationsTopic, every LAST_AGENT item right. Each rate is contacts over the time from the
first put to the poll that saw it (polls are ~0.5 s apart); the figures are our rate over
ministack's, end to end and for the ingest leg alone (every contact in the table).
"""

import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml
from botocore.exceptions import BotoCoreError, ClientError

from bench.common import BUILD, ROOT, Figure
from bench.inprocess import (
    contact_records,
    firehose_key,
    firehose_object,
    notifications_due,
    stored_contacts,
)
from bench.rival import RIVAL, RIVAL_REQUIREMENTS, RIVAL_VERSION, RivalProcess, rival_python
from bench.throughput import RECORDS_PER_FILE, Collector, contacts_in
from emulator.deploy.samconfig import load_samconfig
from emulator.process import REGION, LocalStackProcess, free_port, sam_cli_environment
from harness import connect_records, expected
from harness.stack import StackClient
from harness.topic import TopicCapture

FILES = int(os.environ.get("BENCH_P10_FILES", "10"))
CONTACTS = FILES * RECORDS_PER_FILE
CALLERS = CONTACTS // 4
WARM_UP_RECORDS = 1_000
WARM_UP_WITHIN_SECONDS = 120
DONE_WITHIN_SECONDS = int(os.environ.get("BENCH_P10_TIMEOUT", "300"))
READY_WITHIN_SECONDS = 90
DEPLOY_WITHIN_SECONDS = 300
POLL_SECONDS = 0.5
PORTS = range(5100, 5150)
OUT = ROOT / "bench" / "out"
CONFIG_FILE = ROOT / "samconfig.toml"
# The SAM transform for ministack's CloudFormation, at the version our own tooling pins (uv.lock).
RIVAL_SAM_ENV = ROOT / ".tools" / "ministack-sam"
RIVAL_SAM_REQUIREMENTS = (*RIVAL_REQUIREMENTS, "aws-sam-translator==1.115.0")
REFUSED_TYPE = "AWS::SES::Template"  # ministack 1.5.33's CloudFormation: unrecognized


@dataclass(frozen=True)
class Workload:
    warm_up: bytes  # the warm-up object
    warm_up_notifications: frozenset  # (kind, contact_id) of the warm-up's notifications
    bodies: tuple[bytes, ...]  # the load's objects
    notifications: frozenset  # (kind, contact_id) the load calls for
    last_agents: dict  # caller -> the LAST_AGENT the load leaves


def workload(goodwill_wait_seconds: int) -> Workload:
    rng = random.Random("p10-callers")
    callers = [connect_records.new_caller(rng) for _ in range(CALLERS)]
    records = list(contact_records(CONTACTS, seed=31, callers=callers))
    contacts = stored_contacts(records, goodwill_wait_seconds)
    warm_up = list(
        contact_records(WARM_UP_RECORDS, seed=37, callers=[f"+1303555{n:04d}" for n in range(500)])
    )
    return Workload(
        warm_up=firehose_object(iter(warm_up)),
        warm_up_notifications=frozenset(
            notifications_due(
                stored_contacts(warm_up, goodwill_wait_seconds), goodwill_wait_seconds
            )
        ),
        bodies=tuple(
            firehose_object(iter(records[i * RECORDS_PER_FILE : (i + 1) * RECORDS_PER_FILE]))
            for i in range(FILES)
        ),
        notifications=frozenset(notifications_due(contacts, goodwill_wait_seconds)),
        last_agents=expected.last_agents(contacts),
    )


@dataclass
class Run:
    """Where one stack got to with the load; times in seconds from the first put."""

    warmed_up_in: float | None = None  # the warm-up's notifications all at the topic
    ingested_at: float | None = None  # every contact in the table
    done_at: float | None = None  # and every notification at the topic, every last agent right
    contacts: int = 0
    notifications: int = 0
    last_agents_ok: int = 0

    def rate(self, at: float | None) -> float:
        return CONTACTS / at if at else 0.0

    def describe(self, work: Workload) -> str:
        ingested = f"{self.ingested_at:.1f} s" if self.ingested_at else "not within the bound"
        done = (
            f"done in {self.done_at:.1f} s, {self.rate(self.done_at):.1f} contacts/s"
            if self.done_at
            else f"NOT DONE within {DONE_WITHIN_SECONDS} s"
        )
        return (
            f"{done}, all ingested after {ingested} ({self.rate(self.ingested_at):.1f}/s): "
            f"{self.contacts}/{CONTACTS} contacts, {self.notifications}/"
            f"{len(work.notifications)} notifications, {self.last_agents_ok}/"
            f"{len(work.last_agents)} last agents right; "
            + (
                f"warm-up done in {self.warmed_up_in:.1f} s"
                if self.warmed_up_in is not None
                else f"warm-up NOT done within {WARM_UP_WITHIN_SECONDS} s"
            )
        )


def settled(stack: StackClient, work: Workload, collector: Collector, run: Run) -> bool:
    """Whether every notification of the load reached the topic and, once they have, every
    LAST_AGENT item is right (a BatchGetItem of the callers'); counted in ``run``."""
    run.notifications = len(collector.received()[0].keys() & work.notifications)
    if run.notifications < len(work.notifications):
        return False
    stored = stack.last_agents(work.last_agents)
    run.last_agents_ok = sum(
        stored.get(caller) == value for caller, value in work.last_agents.items()
    )
    return run.last_agents_ok == len(work.last_agents)


def drive(stack: StackClient, work: Workload) -> Run:
    """The warm-up, then the load on ``stack``, until done or DONE_WITHIN_SECONDS."""
    collector = Collector(TopicCapture(stack, "bench-p10-capture"))
    collector.start()
    try:
        stack.s3.put_object(Bucket=stack.bucket, Key=firehose_key(FILES), Body=work.warm_up)
        run, file_ids, logged = Run(), [], {}
        warming = time.monotonic()
        while (elapsed := time.monotonic() - warming) < WARM_UP_WITHIN_SECONDS:
            if work.warm_up_notifications <= collector.received()[0].keys():
                run.warmed_up_in = elapsed
                break
            time.sleep(POLL_SECONDS)
        started = time.monotonic()
        for index, body in enumerate(work.bodies):
            key = firehose_key(index)
            put = stack.s3.put_object(Bucket=stack.bucket, Key=key, Body=body)
            file_ids.append(f"{stack.bucket}/{key}#{put.get('VersionId')}")
        while (elapsed := time.monotonic() - started) < DONE_WITHIN_SECONDS:
            if run.contacts < CONTACTS:
                run.contacts = contacts_in(stack, file_ids, logged)
                if run.contacts == CONTACTS:
                    run.ingested_at = elapsed
            elif settled(stack, work, collector, run):
                run.done_at = elapsed
                return run
            time.sleep(POLL_SECONDS)
        settled(stack, work, collector, run)  # where it got to, for the figures
        return run
    finally:
        collector.stopping.set()
        collector.join(5)


# --- the two stacks ------------------------------------------------------------------------------


def run_ours(work: Workload) -> Run:
    process = LocalStackProcess(free_port(PORTS), log_path=OUT / "p10-local-stack.log")
    try:
        try:
            process.start(READY_WITHIN_SECONDS, ports=PORTS)
        except RuntimeError as error:
            tail = " | ".join(process.lines(2))
            raise RuntimeError(f"{error} (python -m emulator up): {tail}") from error
        return drive(StackClient.local_stack(process), work)
    finally:
        process.stop(grace=20)


def derived_template(built: Path, into: Path) -> list[dict]:
    """The built template without its REFUSED_TYPE resources, written to ``into``, its code
    paths made absolute (``into`` is elsewhere); the removed resources' properties."""
    template = yaml.safe_load(built.read_text())
    resources = template["Resources"]
    refused = [name for name, resource in resources.items() if resource["Type"] == REFUSED_TYPE]
    removed = [resources.pop(name)["Properties"] for name in refused]
    for resource in resources.values():
        properties = resource.get("Properties", {})
        for uri in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(uri), str):
                properties[uri] = str(built.parent / properties[uri])
    into.write_text(yaml.safe_dump(template, sort_keys=False))
    return removed


def with_stack_name(value: Any, stack_name: str) -> Any:
    """A value of a removed resource's properties: as it is, or its Fn::Sub of the stack name."""
    if isinstance(value, dict):
        return value["Fn::Sub"].replace("${AWS::StackName}", stack_name)
    return value


def sam_deploy(template: Path, endpoint: str) -> None:
    """`sam deploy` of ``template`` with samconfig.toml's defaults, against ``endpoint``."""
    sam = shutil.which("sam") or str(ROOT / ".tools" / "bin" / "sam")
    argv = [sam, "deploy", "--template-file", str(template), "--config-file", str(CONFIG_FILE)]
    log = OUT / "p10-sam-deploy.log"
    with log.open("w") as output:
        result = subprocess.run(
            argv,
            cwd=ROOT,
            env=sam_cli_environment(endpoint),
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=DEPLOY_WITHIN_SECONDS,
            check=False,
        )
    if result.returncode:
        errors = [line for line in log.read_text().splitlines() if line.startswith("Error")]
        raise RuntimeError(f"`sam deploy` failed: {' | '.join(errors[-1:]) or f'see {log}'}")


def run_rival(work: Workload, stack_name: str) -> Run:
    python = rival_python(RIVAL_SAM_ENV, RIVAL_SAM_REQUIREMENTS)
    rival = RivalProcess(python, free_port(PORTS), OUT / "p10-ministack.log")
    try:
        rival.wait_ready(READY_WITHIN_SECONDS)
        template = OUT / "p10-ministack-template.yaml"
        removed = derived_template(BUILD / "template.yaml", template)
        sam_deploy(template, rival.endpoint)
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name=REGION,
        )
        ses = session.client("ses", endpoint_url=rival.endpoint)
        for properties in removed:
            template_fields = properties["Template"].items()
            ses.create_template(
                Template={
                    name: with_stack_name(value, stack_name) for name, value in template_fields
                }
            )
        return drive(StackClient.deployed(stack_name, session, rival.endpoint), work)
    finally:
        rival.stop()


# --- the figures ---------------------------------------------------------------------------------


HOW = (
    f"{FILES} x {RECORDS_PER_FILE} contact records after a warm-up object, one stack at a time, "
    f"the built template with samconfig's parameters on both ({RIVAL} {RIVAL_VERSION} through "
    f"`sam deploy`, its {REFUSED_TYPE} resources made with SES CreateTemplate instead)"
)


def figures(work: Workload, ours: Run | str, rival: Run | str) -> list[Figure]:
    """Our rate over ministack's, end to end and the ingest leg; a side given as a string was
    not measured (why): its figures then say so, with value 0."""

    def side(run: Run | str) -> str:
        return run.describe(work) if isinstance(run, Run) else f"NOT MEASURED: {run}"

    detail = f"ours: {side(ours)}; {RIVAL}: {side(rival)}; {HOW}"
    rows = []
    for name, at in (
        ("end to end", "done_at"),
        ("ingest (all contacts in the table)", "ingested_at"),
    ):
        ratio = 0.0
        if isinstance(ours, Run) and isinstance(rival, Run):
            ours_at, rival_at = getattr(ours, at), getattr(rival, at)
            if ours_at and rival_at:
                ratio = round(ours.rate(ours_at) / rival.rate(rival_at), 2)
        rows.append(
            Figure("P10", f"{name} vs {RIVAL}, contacts/s", ratio, f"x {RIVAL}", "-", None, detail)
        )
    return rows


def run() -> list[Figure]:
    """Ours, then ministack; a side that fails (to start, deploy or answer) says why in the
    figures and the other is measured all the same."""
    OUT.mkdir(parents=True, exist_ok=True)
    config = load_samconfig(CONFIG_FILE)
    assert config.stack_name, f"{CONFIG_FILE} names no stack"
    work = workload(int(config.parameter_overrides["GoodwillWaitSeconds"]))
    try:
        ours: Run | str = run_ours(work)
    except (RuntimeError, OSError, BotoCoreError, ClientError) as error:
        ours = f"{type(error).__name__}: {error}"[:400]
    try:
        rival: Run | str = run_rival(work, config.stack_name)
    except (RuntimeError, OSError, subprocess.SubprocessError, BotoCoreError, ClientError) as error:
        rival = f"{RIVAL} {RIVAL_VERSION}: {type(error).__name__}: {error}"[:400]
    return figures(work, ours, rival)


if __name__ == "__main__":
    for figure in run():
        print(figure)
