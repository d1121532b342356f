"""`python -m ops`: the argument parser, the stack connection and the one place errors become
messages and exit codes (0 done, 1 something needs attention, 2 bad input), never tracebacks."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from ops import callers, contacts, dashboard, files, records, redrive, replay, status, table
from ops.errors import OpsError
from ops.stack import CONSUMERS, Stack, samconfig_stack_name

# What reads the table's stream, by fan-out mode: the consumers (lambda), RouterFunction (router),
# ChangePipe (pipe). IngestFunction, NotifierFunction and RouteFunction read none.
STREAM_READERS = (*CONSUMERS, "RouterFunction", "ChangePipe")
# How long a local endpoint may take to accept a connection before it counts as not there.
ENDPOINT_CONNECT_SECONDS = 2


@dataclass
class Report:
    """What a command found or did: ``data`` for --json, ``text`` for people, ``ok`` False when
    something needs the operator (exit 1)."""

    data: Any
    text: str
    ok: bool = True


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m ops",
        description="Operate the stack: status, dashboard, DLQ redrive, stream replay, idempotency "
        "records, file reprocessing, a contact's redrive, a caller's history.",
    )
    add_global_options(top, after_command=False)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # --stack and --json after the command too (`ops status --json`): a newcomer types them there
    after = argparse.ArgumentParser(add_help=False)
    add_global_options(after, after_command=True)

    commands.add_parser("status", parents=[after], help="queues, event source mappings, alarms")
    board = commands.add_parser(
        "dashboard", parents=[after], help="the stack's CloudWatch dashboard as a local web page"
    )
    board.add_argument(
        "--port", type=int, default=dashboard.DEFAULT_PORT, help="on 127.0.0.1 (0: any free one)"
    )

    dlq = group(commands, "dlq", "dead-letter queues")
    move = dlq.add_parser(
        "redrive", parents=[after], help="move a DLQ's messages back to their source queue"
    )
    move.add_argument(
        "queue",
        help="IngestDeadLetterQueue | NotificationDeadLetterQueue | MailDeadLetterQueue | "
        "MailEventsDeadLetterQueue | MailDeliveryDeadLetterQueue; every fan-out mode but lambda: "
        "also LastAgentDeadLetterQueue | SurveyDeadLetterQueue | GoodwillDeadLetterQueue and "
        "what the fan-out could not deliver to those consumers' queues: "
        "LastAgentChangeDeliveryDeadLetterQueue | SurveyChangeDeliveryDeadLetterQueue | "
        "GoodwillChangeDeliveryDeadLetterQueue",
    )
    move.add_argument("--rate", type=int, help="messages per second (1-500; default: fastest)")
    move.add_argument(
        "--dry-run",
        action="store_true",
        help=f"{records.NOTIFICATION_DLQ}: list its messages and which were already published; "
        "move nothing",
    )
    move.add_argument("--yes", action="store_true", help=f"{records.NOTIFICATION_DLQ}: do not ask")
    move.add_argument(
        "--resend",
        action="store_true",
        help=f"{records.NOTIFICATION_DLQ}: also move notifications claimed and never recorded, "
        "releasing their claims (they may have been published: the customer may get them twice)",
    )

    stream = group(commands, "stream", "stream consumers")
    again = stream.add_parser(
        "replay", parents=[after], help="replay the batches in StreamFailureQueue"
    )
    again.add_argument("--dry-run", action="store_true", help="show what would be replayed")
    again.add_argument(
        "--function",
        choices=STREAM_READERS,
        metavar="READER",
        help="only the failures of this stream reader: a consumer's LogicalId (fan-out mode "
        f"lambda), RouterFunction (router) or ChangePipe (pipe): {' | '.join(STREAM_READERS)}",
    )

    claim_actions = group(commands, "idempotency", "Powertools idempotency records")
    for action, text in (("show", "show a record"), ("purge", "delete a record")):
        command = claim_actions.add_parser(action, parents=[after], help=text)
        command.add_argument("function", help=" | ".join(records.CLAIMS))
        command.add_argument("file", nargs="?", help="IngestFunction: s3://bucket/key")
        command.add_argument("--version-id", help="IngestFunction: the object version")
        command.add_argument(
            "--notification-id", type=notification_id, help="NotifierFunction: KIND#contact_id"
        )
        command.add_argument("--kind", help="NotifierFunction: SURVEY | GIFT_CARD")
        command.add_argument("--contact-id", help="NotifierFunction: with --kind")
        if action == "purge":
            command.add_argument("--yes", action="store_true", help="do not ask")
            command.add_argument(
                "--resend",
                action="store_true",
                help="NotifierFunction: purge a COMPLETED (published) or INPROGRESS (may have "
                "been published) record, so that the customer gets the notification again",
            )

    file = group(commands, "file", "contact files")
    for action, text in (
        ("status", "the file's processing log"),
        ("reprocess", "release the file's claim and ingest it again"),
    ):
        command = file.add_parser(action, parents=[after], help=text)
        command.add_argument("url", help="s3://bucket/key")
        command.add_argument("--version-id", help="default: the current version")
        if action == "reprocess":
            command.add_argument("--yes", action="store_true", help="do not ask")

    again = group(commands, "contact", "contacts").add_parser(
        "redrive",
        parents=[after],
        help="send a contact's current state to the consumers again (its version unchanged)",
    )
    again.add_argument("contact_id", help="the contact's id (Connect's ContactId)")
    again.add_argument(
        "--dry-run", action="store_true", help="say what it would send; send nothing"
    )
    again.add_argument(
        "--resend",
        action="store_true",
        help="send a notification the notifier claimed and never recorded (it may have been "
        "published: the customer may get it twice)",
    )
    again.add_argument("--yes", action="store_true", help="do not ask")

    show = group(commands, "caller", "callers").add_parser(
        "show", parents=[after], help="last agent and recent contacts (masked)"
    )
    show.add_argument("number", help="E.164, e.g. +15551234567")
    show.add_argument("--contacts", type=int, default=5, help="how many recent contacts")
    return top


def add_global_options(command: argparse.ArgumentParser, after_command: bool) -> None:
    """--stack and --json. After the command they default to nothing set, so that one given
    before the command is kept."""
    unset = argparse.SUPPRESS
    command.add_argument(
        "--stack",
        default=unset if after_command else None,
        help="stack name (default: samconfig.toml's stack_name)",
    )
    command.add_argument(
        "--json",
        action="store_true",
        default=unset if after_command else False,
        help="machine-readable output",
    )


def notification_id(text: str) -> str:
    """--notification-id's shape; the kind and the contact id are checked where it is used."""
    kind, separator, contact_id = text.partition("#")
    if not (kind and separator and contact_id):
        raise argparse.ArgumentTypeError(f"{text!r}: expected KIND#contact_id, e.g. SURVEY#c-1001")
    return text


def group(commands: Any, name: str, text: str) -> Any:
    """A command with actions (`ops dlq redrive`, `ops file status`, ...)."""
    return commands.add_parser(name, help=text).add_subparsers(dest="action", required=True)


COMMANDS: dict[tuple[str, str | None], Callable[[Stack, argparse.Namespace], Report]] = {
    ("status", None): lambda stack, args: Report(*status.report(stack)),
    ("dashboard", None): lambda stack, args: Report(*dashboard.serve(stack, args.port)),
    ("dlq", "redrive"): lambda stack, args: Report(*dlq_redrive(stack, args)),
    ("stream", "replay"): lambda stack, args: Report(
        *replay.replay(stack, dry_run=args.dry_run, function=args.function)
    ),
    ("idempotency", "show"): lambda stack, args: Report(*records.show(stack, args)),
    ("idempotency", "purge"): lambda stack, args: Report(
        *records.purge(stack, args, None if args.yes else confirm)
    ),
    ("file", "status"): lambda stack, args: Report(*files.status(stack, args.url, args.version_id)),
    ("file", "reprocess"): lambda stack, args: Report(
        *files.reprocess(stack, args.url, args.version_id, None if args.yes else confirm)
    ),
    ("contact", "redrive"): lambda stack, args: Report(
        *contacts.redrive(
            stack,
            args.contact_id,
            dry_run=args.dry_run,
            resend=args.resend,
            confirm=None if args.yes else confirm,
        )
    ),
    ("caller", "show"): lambda stack, args: Report(
        *callers.show(stack, args.number, args.contacts)
    ),
}


def dlq_redrive(stack: Stack, args: argparse.Namespace) -> tuple[Any, str, bool]:
    """NotificationDeadLetterQueue's messages are listed (already published or not) before they
    move; the other DLQs are redriven as they are."""
    if args.queue == records.NOTIFICATION_DLQ:
        return records.redrive_notifications(
            stack,
            args.rate,
            dry_run=args.dry_run,
            resend=args.resend,
            confirm=None if args.yes else confirm,
            progress=not args.json,
        )
    if args.dry_run or args.resend:
        raise OpsError(f"--dry-run and --resend are for {records.NOTIFICATION_DLQ} only")
    return redrive.redrive(stack, args.queue, args.rate, progress=not args.json)


def confirm(question: str) -> bool:
    """Ask on the terminal; without one, refuse (scripts pass --yes)."""
    if not sys.stdin.isatty():
        raise OpsError(f"{question}: no terminal to confirm on; pass --yes")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def connect(name: str | None) -> Stack:
    stack_name = name or samconfig_stack_name()
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and not answering(endpoint):
        # Said at once: the clients' retries would spend seconds on a port nothing listens on.
        raise OpsError(
            f"no stack answering at {endpoint} (AWS_ENDPOINT_URL): start the local stack with "
            "`make up` in another shell, or unset AWS_ENDPOINT_URL for a deployed stack"
        )
    try:
        return Stack.deployed(stack_name)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ValidationError":
            raise OpsError(f"no stack {stack_name!r} in this account and region") from None
        raise
    except AssertionError as error:  # Stack: outputs missing
        raise OpsError(f"{stack_name} is not this application's stack: {error}") from None


def answering(endpoint: str) -> bool:
    """Whether anything accepts a connection at the endpoint URL."""
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=ENDPOINT_CONNECT_SECONDS):
            return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        stack = connect(args.stack)
        report = COMMANDS[(args.command, getattr(args, "action", None))](stack, args)
    except OpsError as error:
        print(table.visible_lines(f"ops: error: {error}"), file=sys.stderr)
        return 2
    except ClientError as error:
        failure = error.response["Error"]
        message = f"ops: AWS error: {failure['Code']}: {failure.get('Message', '')}"
        print(table.visible_lines(message), file=sys.stderr)
        return 1
    except BotoCoreError as error:
        print(table.visible_lines(f"ops: AWS error: {error}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ops: interrupted", file=sys.stderr)
        return 130
    try:
        # JSON escapes every control character itself; the text is escaped here, for every command
        print(
            json.dumps(report.data, indent=2, default=str)
            if args.json
            else table.visible_lines(report.text)
        )
        sys.stdout.flush()
    except BrokenPipeError:  # `ops status | head`: the reader left; no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if report.ok else 1
