"""moto 5.2.6's Step Functions as the local stack runs them: StartSyncExecution of an Express state
machine, executed by moto's ASL interpreter (moto/stepfunctions/parser, ported from LocalStack).

moto stores state machines (CreateStateMachine, AWS::StepFunctions::StateMachine) but answers
StartSyncExecution "Not yet implemented", and its interpreter runs only behind its
``execute_state_machine`` setting, whose backend holds other machines than CloudFormation's. Here:

- ``start_sync_execution``: the machine moto stores, run to its end in the caller's thread
  (moto's ``SyncExecution``: Parallel, Map, Pass, Choice, Task ...), answered as AWS's
  StartSyncExecution answers: ``status`` SUCCEEDED with ``output``, or FAILED / TIMED_OUT with
  ``error`` and ``cause``. A STANDARD machine is refused (StateMachineTypeNotSupported), as AWS
  refuses it; so is input that is not JSON (InvalidExecutionInput).
- ``check_definition``: CreateStateMachine and UpdateStateMachine (and so
  ``AWS::StepFunctions::StateMachine``) refuse a definition Step Functions refuses, which moto
  stores whatever it is: not JSON (``INVALID_JSON_DESCRIPTION``), a state machine or branch
  without ``StartAt`` and ``States``, a state of no known ``Type`` or, but for Choice, Succeed
  and Fail, with neither ``Next`` nor ``End`` (``SCHEMA_VALIDATION_FAILED``), a ``StartAt``,
  ``Next`` or ``Default`` naming no state of its ``States`` (``MISSING_TRANSITION_TARGET``), then
  whatever moto's ASL parser cannot read; each as ``InvalidDefinition`` with the path of the
  fault ("Invalid State Machine Definition: '<CODE>: <message> at /States/<name>'").
- ``install()``: StartSyncExecution answered over HTTP (in process too: moto's mock routes only
  ``states.<region>``, not the ``sync-states.<region>`` host botocore sends it to);
  ``AWS::StepFunctions::StateMachine`` keeps its ``StateMachineType`` (moto's CloudFormation
  model makes every machine STANDARD) and takes ``Definition`` as well as ``DefinitionString``;
  the interpreter's SQS integration
  (``arn:aws:states:::sqs:sendMessage``) sends to the queue in process (moto's SQS backend,
  whose queues wake their pollers: emulator/services/sqs.py) instead of over HTTP to moto's
  default port. A queue that does not exist fails the task as AWS does (``SQS.SdkClientException``
  in moto's interpreter; the execution fails unless the state catches it).

The interpreter's finished threads are dropped after each execution: moto keeps every one, and
their stacks stayed mapped until the process ran out of memory maps (``_release_finished_threads``).

Each execution is counted in the machine's ``AWS/States`` metrics (``ExecutionsFailed``:
ChangeMachineFailuresAlarm's), as Step Functions counts an Express machine's executions.

moto's interpreter spends most of an execution copying: each state deep-copies its frame's
stack (a Map item the whole batch), its input and its output with ``copy.deepcopy``, and
builds a new JSONPath parser (PLY's tables) for every path it evaluates; a ChangeMachine
execution of 10 records took ~300 ms of CPU. ``install()`` gives those modules a copy that
walks JSON values directly (dicts, lists and scalars; anything else still through
``copy.deepcopy``) and one parsed expression per JSONPath (bench: ``make bench``'s P5 in
pipe-sfn). It also parses the definition again at each execution's start and writes a history
event at every step, which an Express execution never shows: a definition is parsed once per
text, and an Express execution without logging keeps no history.

Each SQS task is decided first with the machine's execution role and the queue's policy
(emulator/iam/resources.py ``role_may``: ``sqs:SendMessage`` on the queue); a refusal fails the
task as a client error (the pipe's role is decided for StartSyncExecution:
emulator/delivery/pipes.py).
"""

from __future__ import annotations

import copy
import datetime
import functools
import importlib
import json
import logging
import re
import threading
import time
import types
import uuid
from typing import Any

from botocore.exceptions import ClientError
from moto import backend_index
from moto.core.exceptions import ServiceException
from moto.core.utils import utcnow
from moto.sqs.models import sqs_backends
from moto.stepfunctions import urls as stepfunctions_urls
from moto.stepfunctions.exceptions import InvalidExecutionInput
from moto.stepfunctions.models import StateMachine, StepFunctionBackend, stepfunctions_backends
from moto.stepfunctions.parser.asl.component.common.path import result_path
from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds
from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state.exec import execute_state
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
    distributed_iteration_component,
    inline_iteration_component,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_sqs,
)
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.evaluation_details import StateMachineDetails
from moto.stepfunctions.parser.asl.eval.event.event_manager import (
    EventHistoryContext,
    EventManager,
)
from moto.stepfunctions.parser.asl.parse.asl_parser import (
    AmazonStateLanguageParser,
    ASLParserException,
)
from moto.stepfunctions.parser.asl.utils import json_path
from moto.stepfunctions.parser.backend.execution import SyncExecution
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
from moto.stepfunctions.parser.utils import TMP_THREADS
from moto.stepfunctions.responses import StepFunctionResponse

from emulator.core.arns import parse_arn
from emulator.iam.policy import Request
from emulator.iam.resources import role_may
from emulator.services import cloudwatch, patching

EXPRESS = "EXPRESS"
# Step Functions runs at most 40 iterations of an inline Map state at once
INLINE_MAP_CONCURRENCY = 40
log = logging.getLogger("emulator.stepfunctions")


class StateMachineTypeNotSupported(ServiceException):
    code = "StateMachineTypeNotSupported"


class InvalidDefinition(ServiceException):
    code = "InvalidDefinition"

    def __init__(self, code: str, message: str, where: str = "") -> None:
        at = f" at {where}" if where else ""
        super().__init__(f"Invalid State Machine Definition: '{code}: {message}{at}'")


STATE_TYPES = frozenset({"Pass", "Task", "Choice", "Wait", "Succeed", "Fail", "Parallel", "Map"})
ENDLESS_TYPES = frozenset({"Choice", "Succeed", "Fail"})  # end without Next or End


def check_definition(definition: str) -> None:
    """Refuse a definition Step Functions refuses at create time (see the module docstring)."""
    try:
        document = json.loads(definition)
    except ValueError as error:
        raise InvalidDefinition("INVALID_JSON_DESCRIPTION", str(error)) from None
    _check_program(document, "")
    try:
        AmazonStateLanguageParser.parse(definition)
    except ASLParserException as error:
        raise InvalidDefinition("SCHEMA_VALIDATION_FAILED", "; ".join(error.errors)) from None


def _check_program(program: Any, where: str) -> None:
    """A state machine, a Parallel branch or a Map's item processor: StartAt and its States."""
    if not isinstance(program, dict):
        raise InvalidDefinition("SCHEMA_VALIDATION_FAILED", "Expected an object", where or "/")
    states = program.get("States")
    if not isinstance(states, dict) or not states:
        raise InvalidDefinition(
            "SCHEMA_VALIDATION_FAILED", "These fields are required: [States]", where or "/"
        )
    start = program.get("StartAt")
    if not isinstance(start, str):
        raise InvalidDefinition(
            "SCHEMA_VALIDATION_FAILED", "These fields are required: [StartAt]", where or "/"
        )
    if start not in states:
        raise InvalidDefinition(
            "MISSING_TRANSITION_TARGET", f"Missing 'Next' target: {start}", f"{where}/StartAt"
        )
    for name, state in states.items():
        _check_state(state, states, f"{where}/States/{name}")


def _check_state(state: Any, states: dict[str, Any], where: str) -> None:
    kind = state.get("Type") if isinstance(state, dict) else None
    if kind not in STATE_TYPES:
        raise InvalidDefinition("SCHEMA_VALIDATION_FAILED", f"Unknown state type: {kind}", where)
    targets = [state["Next"]] if "Next" in state else []
    if kind == "Choice":
        targets += [choice.get("Next") for choice in state.get("Choices", [])]
        targets += [state["Default"]] if "Default" in state else []
    elif kind not in ENDLESS_TYPES and (("Next" in state) == (state.get("End") is True)):
        raise InvalidDefinition(
            "SCHEMA_VALIDATION_FAILED", "A state must have exactly one of Next or End", where
        )
    for target in targets:
        if target not in states:
            raise InvalidDefinition(
                "MISSING_TRANSITION_TARGET", f"Missing 'Next' target: {target}", where
            )
    for n, branch in enumerate(state.get("Branches", []) if kind == "Parallel" else []):
        _check_program(branch, f"{where}/Branches[{n}]")
    if kind == "Map":
        processor = state.get("ItemProcessor") or state.get("Iterator")
        _check_program(processor, f"{where}/ItemProcessor")


def _checked_create(original: Any) -> Any:
    def create_state_machine(self: Any, name: str, definition: str, *args: Any, **kwargs: Any):
        check_definition(definition)
        return original(self, name, definition, *args, **kwargs)

    return create_state_machine


def _checked_update(original: Any) -> Any:
    def update_state_machine(self: Any, arn: str, definition: str | None = None, **kwargs: Any):
        if definition is not None:
            check_definition(definition)
        return original(self, arn, definition, **kwargs)

    return update_state_machine


class _ExpressSyncExecution(SyncExecution):
    """moto's SyncExecution, its program told that it runs an Express machine (moto's
    StateMachine gives the interpreter "STANDARD" for every machine: a constant ``sm_type``)."""

    def get_start_state_machine_details(self) -> StateMachineDetails:
        details = super().get_start_state_machine_details()
        details.typ = self.sm_type
        return details


def start_sync_execution(
    state_machine_arn: str, execution_input: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """Run the Express machine to its end; AWS's StartSyncExecution answer (datetimes as such)."""
    arn = parse_arn(state_machine_arn)
    backend = stepfunctions_backends[arn.account][arn.region]
    machine: StateMachine = backend.describe_state_machine(state_machine_arn)
    if machine.type != EXPRESS:
        raise StateMachineTypeNotSupported(
            f"StartSyncExecution runs EXPRESS state machines only; {machine.name} is {machine.type}"
        )
    execution_input = "{}" if execution_input is None else execution_input
    try:
        json.loads(execution_input)
    except ValueError as error:
        raise InvalidExecutionInput(f"Invalid State Machine Execution Input: {error}") from None
    name = name or str(uuid.uuid4())
    execution = _ExpressSyncExecution(
        name=name,
        sm_type=EXPRESS,
        role_arn=machine.roleArn,
        exec_arn=(
            f"arn:{arn.partition}:states:{arn.region}:{arn.account}:express:{machine.name}:"
            f"{name}:{uuid.uuid4()}"
        ),
        account_id=arn.account,
        region_name=arn.region,
        state_machine=machine,
        start_date=datetime.datetime.now(tz=datetime.UTC),
        cloud_watch_logging_session=None,
        activity_store={},
        input_data=execution_input,
    )
    started = time.monotonic()
    try:
        execution.start()  # SyncExecutionWorker: runs the program in this thread, to its end
    finally:
        _release_finished_threads()
    output = dict(execution.to_start_sync_execution_output())
    _count_execution(state_machine_arn, output["status"], (time.monotonic() - started) * 1000)
    return output


def _release_finished_threads() -> None:
    """Drop the interpreter's finished threads from the list it keeps every thread in.

    Gap (a leak, not behaviour): moto's interpreter appends each thread it starts (the program's,
    one per Parallel branch, one per Map iteration ...) to ``TMP_THREADS`` and never removes it.
    A Python 3.13 thread that is neither joined nor dropped keeps its 8 MB stack mapped after it
    ends: two branches mapping 10 items left 25 stacks per execution. Under P5's load in mode
    pipe-sfn (batches of up to 100 records, three branches) the local stack reached the kernel's
    limit of memory maps (vm.max_map_count, 65,530) within minutes, and then "can't start new
    thread" and MemoryError broke every service it serves. A dropped thread's stack is freed
    when the thread ends. A thread still running stays listed: another execution is running it.
    An append that races this rebuild is dropped too, which only frees that stack sooner."""
    TMP_THREADS[:] = [thread for thread in TMP_THREADS if thread.is_alive()]


def _count_execution(state_machine_arn: str, status: str, duration_ms: float) -> None:
    """The execution in the machine's AWS/States metrics, as Step Functions publishes them for an
    Express machine: ExecutionsStarted 1; ExecutionsSucceeded, ExecutionsFailed and
    ExecutionsTimedOut 1 or 0 by its status; ExecutionTime in milliseconds. (Not published:
    ExecutionsAborted, which a synchronous execution cannot be, and the throttling metrics.)"""
    arn = parse_arn(state_machine_arn)
    dimensions = [{"Name": "StateMachineArn", "Value": state_machine_arn}]
    now = utcnow()
    values = (
        ("ExecutionsStarted", 1, "Count"),
        ("ExecutionsSucceeded", int(status == "SUCCEEDED"), "Count"),
        ("ExecutionsFailed", int(status == "FAILED"), "Count"),
        ("ExecutionsTimedOut", int(status == "TIMED_OUT"), "Count"),
        ("ExecutionTime", duration_ms, "Milliseconds"),
    )
    data = [
        {"MetricName": n, "Value": v, "Unit": u, "Dimensions": dimensions, "Timestamp": now}
        for n, v, u in values
    ]
    cloudwatch.put_metric_data(arn.account, arn.region, "AWS/States", data)


# --- the interpreter's SQS integration, in process ---------------------------------------------
class _QueuesInProcess:
    """What the interpreter's SQS task calls on its "client" (built for the state's region):
    SendMessage on moto's SQS backend; moto's errors as the ClientError a client would raise."""

    def __init__(self, region: str):
        self.region = region

    def send_message(self, QueueUrl: str, MessageBody: str, **params: Any) -> dict[str, Any]:
        account, queue_name = _queue_of(QueueUrl)
        try:
            message = sqs_backends[account][self.region].send_message(
                queue_name,
                MessageBody,
                message_attributes=params.get("MessageAttributes"),
                delay_seconds=params.get("DelaySeconds"),
                deduplication_id=params.get("MessageDeduplicationId"),
                group_id=params.get("MessageGroupId"),
            )
        except ServiceException as error:
            error_body = {"Code": error.code, "Message": error.message}
            raise ClientError({"Error": error_body}, "SendMessage") from None
        return {"MessageId": message.id, "Md5OfMessageBody": message.body_md5}


def _queue_of(queue_url: str) -> tuple[str, str]:
    """The account and the name of the queue at ``queue_url``."""
    *_, account, queue_name = queue_url.rstrip("/").split("/")
    return account, queue_name


def _sqs_task_as_the_role(original: Any) -> Any:
    def eval_service_task(
        self: Any,
        env: Any,
        resource_runtime_part: Any,
        normalised_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> None:
        account, queue_name = _queue_of(normalised_parameters.get("QueueUrl") or "")
        queue_arn = f"arn:aws:sqs:{resource_runtime_part.region}:{account}:{queue_name}"
        role_arn = env.aws_execution_details.role_arn
        action = Request("sqs:SendMessage", queue_arn)
        decision = role_may(role_arn, "states", action)
        if not decision.allowed:
            message = (
                f"User: {role_arn} is not authorized to perform: sqs:SendMessage on resource: "
                f"{queue_arn} {decision.reason(action.action)}"
            )
            raise ClientError(
                {"Error": {"Code": "AccessDenied", "Message": message}}, "SendMessage"
            )
        return original(self, env, resource_runtime_part, normalised_parameters, **kwargs)

    return eval_service_task


def _sqs_client_for(region: str, service: str, state_credentials: Any = None) -> _QueuesInProcess:
    return _QueuesInProcess(region)


# --- the interpreter's copies and JSONPath parses -------------------------------------------------
_SCALARS = (str, int, float, bool, type(None))


def _copy_json(value: Any, memo: dict | None = None) -> Any:
    """``copy.deepcopy`` for the interpreter's values: JSON walked directly (a JSON value shares
    no objects, so nothing needs the memo), anything else through ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {key: _copy_json(item) for key, item in value.items()}
    if kind is list:
        return [_copy_json(item) for item in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value, memo)


_COPYING = types.SimpleNamespace(deepcopy=_copy_json, copy=copy.copy)
# the interpreter's modules that deep-copy values on every state
_COPYING_MODULES = (
    "asl.component.state.exec.execute_state",
    "asl.component.state.exec.state_map.state_map",
    "asl.component.state.exec.state_parallel.state_parallel",
    "asl.component.state.exec.state_task.service.state_task_service",
    "asl.component.common.string.string_expression",
    "asl.component.common.path.result_path",
    "asl.eval.states",
    "asl.eval.environment",
    "asl.eval.event.event_manager",
)


def _install_fast_copies() -> None:
    for name in _COPYING_MODULES:
        patching.replace(
            importlib.import_module(f"moto.stepfunctions.parser.{name}"), "copy", _COPYING
        )
    for module in (json_path, result_path):
        # a parsed expression is only read (find, update on the caller's data)
        patching.replace(module, "parse", functools.lru_cache(maxsize=512)(module.parse))


# --- threads the interpreter starts only to wait for them --------------------------------------
# moto's interpreter runs each program (the machine, each Map iteration, each Parallel branch) and
# each Task's work in a thread of its own, and waits for it: for the program's TimeoutSeconds, the
# state's TimeoutSeconds (99999999 when none is given). An inline Map starts one worker thread
# per item. A 100-record ChangeMachine execution started ~900 threads: 444 ms of CPU, ~300 ms with
# the waits below in the caller's thread. Without a timeout the wait is the caller's own; so a
# program without TimeoutSeconds, and a state's work under the default one, run in the thread
# that waits for them. A Parallel state's branches keep their threads (they run at once), and an
# inline Map gets at most 40 (INLINE_MAP_CONCURRENCY, Step Functions' limit; a distributed Map
# is moto's), which take its items in turn as moto's workers do.
_waits = threading.local()  # .inline: the state evaluated in this thread has the default timeout


def _program_eval(original: Any) -> Any:
    def eval(self: Program, env: Any) -> None:
        if self.timeout_seconds is not None:
            original(self, env)
            return
        env.next_state_name = self.start_at.start_at_name
        try:
            EvalComponent.eval(self, env)
        except Exception:  # as the program's thread would end: reported, the execution goes on
            log.exception("a program of an execution ended with an exception")

    return eval


class _StateWorkThread(threading.Thread):
    """execute_state's Thread: run by ``start()`` itself when its state has the default timeout."""

    def start(self) -> None:
        if getattr(_waits, "inline", False):
            self.run()
        else:
            super().start()


def _evaluate_with_timeout(original: Any) -> Any:
    def evaluate(self: Any, env: Any) -> None:
        outer = getattr(_waits, "inline", False)
        _waits.inline = isinstance(self.timeout, TimeoutSeconds) and self.timeout.is_default_value()
        try:
            original(self, env)
        finally:
            _waits.inline = outer

    return evaluate


def _launch_worker(original: Any) -> Any:
    def launch(self: Any, env: Any, eval_input: Any, job_pool: Any) -> Any:
        launched = job_pool.__dict__.get("_q_workers", 0)
        distributed = distributed_iteration_component.DistributedIterationComponent
        if launched >= INLINE_MAP_CONCURRENCY and not isinstance(self, distributed):
            return None  # the running workers take the rest of the items
        job_pool._q_workers = launched + 1
        return original(self, env, eval_input, job_pool)

    return launch


def _install_inline_waits() -> None:
    for owner, name, wrap in (
        (Program, "eval", _program_eval),
        (execute_state.ExecutionState, "_evaluate_with_timeout", _evaluate_with_timeout),
        (inline_iteration_component.InlineIterationComponent, "_launch_worker", _launch_worker),
    ):
        patching.replace(owner, name, wrap(patching.original(owner, name)))
    patching.replace(execute_state, "Thread", _StateWorkThread)


# --- a definition parsed once ---------------------------------------------------------------------
# moto's interpreter parses the machine's definition (ANTLR's lexer and parser, then its
# preprocessor) at the start of every execution: a third of the CPU of a 10-record ChangeMachine
# execution. The program it builds is only read while it runs (an execution keeps its state in its
# own Environment), but for one id each component draws the first time it is asked: the key of its
# values (a retrier's attempts) in the execution's heap. Drawn by two executions at once, one would
# look its count up under the other's key. So a program is kept per definition, and a component's
# heap key is its identity, fixed as long as the kept program lives.
@functools.lru_cache(maxsize=64)
def _program(definition: str) -> Program:
    return AmazonStateLanguageParser.parse(definition)[0]


def _evaluation_entrypoint(self: ExecutionWorker) -> Program:
    return _program(self._evaluation_details.state_machine_details.definition)


def _heap_key(self: EvalComponent) -> str:
    return f"{type(self).__name__}-{id(self)}"


# --- an Express execution keeps no history -------------------------------------------------------
# moto's interpreter adds a history event for each state an execution enters and leaves, and for
# each Map iteration and each task step: a dict with a formatted timestamp, kept in a list. Step
# Functions keeps no history for an Express execution (GetExecutionHistory and DescribeExecution
# are "not supported by EXPRESS state machines"); with logging on, the events go to CloudWatch
# Logs. So an Express execution without a logging session numbers its events as moto does (each
# failure names the event it follows, and the execution's output and errors come from its
# program's state, not from its history) and keeps none: ~30% of the CPU of a 100-record
# ChangeMachine execution (pipe-sfn). The callers still render each event's details.
class _UnkeptHistory(EventManager):
    def add_event(
        self,
        context: EventHistoryContext,
        event_type: Any,
        event_details: Any = None,
        timestamp: Any = None,
        update_source_event_id: bool = True,
    ) -> int:
        with self._mutex:
            event_id: int = self._event_id_gen.get()
            context.last_published_event_id = event_id
            if update_source_event_id:
                context.source_event_id = event_id
            return event_id


def _evaluation_environment(original: Any) -> Any:
    """The execution's environment, with _UnkeptHistory for an Express execution without
    logging; its frames (Map iterations, branches) take the execution's event manager."""

    def environment(self: ExecutionWorker) -> Environment:
        env = original(self)
        if env.execution_type == EXPRESS and env.cloud_watch_logging_session is None:
            env.event_manager = _UnkeptHistory()
        return env

    return environment


def _install_kept_programs_without_history() -> None:
    patching.replace(ExecutionWorker, "_get_evaluation_entrypoint", _evaluation_entrypoint)
    patching.replace(EvalComponent, "heap_key", property(_heap_key))
    original_environment = patching.original(ExecutionWorker, "_get_evaluation_environment")
    patching.replace(
        ExecutionWorker,
        "_get_evaluation_environment",
        _evaluation_environment(original_environment),
    )


# --- StartSyncExecution over HTTP; AWS::StepFunctions::StateMachine's type ----------------------
def _start_sync_execution_response(self: StepFunctionResponse) -> str:
    output = start_sync_execution(
        self._get_param("stateMachineArn"), self._get_param("input"), self._get_param("name")
    )
    for key in ("startDate", "stopDate"):
        if output.get(key) is not None:
            output[key] = output[key].timestamp()
    return json.dumps(output)


def _state_machine_from_cloudformation(
    cls: type[StateMachine],
    resource_name: str,
    cloudformation_json: Any,
    account_id: str,
    region_name: str,
    **kwargs: Any,
) -> StateMachine:
    properties = cloudformation_json["Properties"]
    definition = properties.get("DefinitionString") or json.dumps(properties.get("Definition", {}))
    tags = [{"key": t["Key"], "value": t["Value"]} for t in properties.get("Tags", [])]
    return stepfunctions_backends[account_id][region_name].create_state_machine(
        properties.get("StateMachineName", resource_name),
        definition,
        properties.get("RoleArn", ""),
        tags=tags,
        sm_type=properties.get("StateMachineType", "STANDARD"),
    )


def install() -> None:
    _install_fast_copies()
    _install_inline_waits()
    _install_kept_programs_without_history()
    for name, checked in (
        ("create_state_machine", _checked_create),
        ("update_state_machine", _checked_update),
    ):
        original = patching.original(StepFunctionBackend, name)
        patching.replace(StepFunctionBackend, name, checked(original))
    # StartSyncExecution's host prefix: "sync-states.<region>.amazonaws.com"
    sync_host = r"https?://(?:sync-)?states\.(.+)\.amazonaws.com"
    patching.replace(stepfunctions_urls, "url_bases", [sync_host])
    patching.replace(
        backend_index,
        "backend_url_patterns",
        [
            (service, re.compile(sync_host) if service == "stepfunctions" else pattern)
            for service, pattern in backend_index.backend_url_patterns
        ],
    )
    patching.replace(state_task_service_sqs, "boto_client_for", _sqs_client_for)
    sqs_task = state_task_service_sqs.StateTaskServiceSqs
    patching.replace(
        sqs_task,
        "_eval_service_task",
        _sqs_task_as_the_role(patching.original(sqs_task, "_eval_service_task")),
    )
    patching.replace(StepFunctionResponse, "start_sync_execution", _start_sync_execution_response)
    patching.replace(
        StateMachine,
        "create_from_cloudformation_json",
        classmethod(_state_machine_from_cloudformation),
    )
