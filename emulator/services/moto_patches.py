"""Every in-process patch of moto 5.2.6 the local stack relies on, installed and undone here.

Each service module (emulator/services/<service>.py) says which gaps of moto it closes and where
in moto the behaviour lives, and installs its patches with ``patching.replace``; ``uninstall()``
undoes all of them with ``patching.restore_all`` (tests share a process with plain moto users)
and forgets the services' own state. ``install()`` runs once (idempotent) in the process that
serves moto; the stack's runtime and fault switches reach the patches through context.py. Gaps
closed by the deployer instead (bucket notifications, layers, code locations) live in
emulator/deploy/.
"""

from __future__ import annotations

import threading

from emulator.services import (
    awslambda,
    cloudformation,
    cloudwatch,
    context,
    delivery_failures,
    dynamodb,
    dynamodb_api,
    dynamodb_validation,
    dynamodbstreams,
    events,
    firehose,
    patching,
    pipes,
    responses,
    s3,
    ses,
    sns,
    sns_filter_policies,
    sqs,
    sqs_move_tasks,
    stepfunctions,
)

_installed = False
_install_lock = threading.Lock()


def install() -> None:
    global _installed  # noqa: PLW0603
    with _install_lock:
        if _installed:
            return
        # Order matters where two patch one attribute: each wraps what is there.
        sqs.install()
        sqs_move_tasks.install()
        dynamodbstreams.install()
        responses.install()
        events.install()
        sns_filter_policies.install()
        pipes.install()
        delivery_failures.install()
        awslambda.install()
        dynamodb.install()
        dynamodb_validation.install()  # wraps the handler methods dynamodb.py locks
        dynamodb_api.install()
        s3.install()
        sns.install()
        cloudwatch.install()
        stepfunctions.install()
        firehose.install()
        ses.install()
        cloudformation.install(
            [
                sns.SnsSubscriptionModel,
                sns.TopicPolicyModel,
                s3.BucketPolicyModel,
                pipes.PipeModel,
                delivery_failures.QueuePolicyModel,
                cloudwatch.AlarmModel,
                firehose.DeliveryStreamModel,
                *ses.MODELS,
            ]
        )
        _installed = True


def uninstall() -> None:
    """Restore moto as it was."""
    global _installed  # noqa: PLW0603
    with _install_lock:
        sqs.uninstall()
        sqs_move_tasks.reset()
        patching.restore_all()
        context.set_runtime(None)
        context.set_faults(None)
        _installed = False
