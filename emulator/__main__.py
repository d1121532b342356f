"""python -m emulator {up,invoke,filter-test,iam-report}: the Docker-free local stack.

See docs/local-stack.md. Subcommands import what they need when they run (`filter-test` stays
fast: it never imports moto or boto3).
"""

# ruff: noqa: PLC0415 - imports are lazy on purpose (see above)

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.core.faults import Flag, Switch

DEFAULT_TEMPLATE = "template.yaml"
PROCESS_START = time.monotonic()  # the `ready` line's time counts imports too


def _positive_float(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return number


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return number


def _parameter_overrides(text: str) -> list[tuple[str, str]]:
    """One `--parameter-overrides` argument, as SAM CLI reads it: space-separated (shell-quoted)
    `Key=Value` or `ParameterKey=Key,ParameterValue=Value` entries."""
    import shlex

    try:
        entries = shlex.split(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    pairs = []
    for entry in entries:
        if entry.startswith("ParameterKey="):
            key_part, sep, value_part = entry.partition(",")
            key = key_part.removeprefix("ParameterKey=")
            if not sep or not value_part.startswith("ParameterValue="):
                raise argparse.ArgumentTypeError(
                    f"{entry!r}: expected ParameterKey=Key,ParameterValue=Value"
                )
            value = value_part.removeprefix("ParameterValue=")
        else:
            key, sep, value = entry.partition("=")
            if not sep:
                raise argparse.ArgumentTypeError(f"{entry!r}: expected Key=Value")
        if not key:
            raise argparse.ArgumentTypeError(f"{entry!r}: no parameter name")
        pairs.append((key, value))
    return pairs


def _fault_flags(up: argparse.ArgumentParser) -> None:
    """The `up` flag of every fault switch that has one (emulator/core/faults.py): its value is the
    switch's start-up value, as JSON; not given, the switch keeps its default."""
    from emulator.core.faults import SWITCHES

    for name, switch in SWITCHES.items():
        flag = switch.flag
        if flag is None:
            continue
        up.add_argument(
            flag.name,
            dest=name,
            type=_flag_value(name, switch, flag),
            action="append" if flag.repeatable else "store",
            default=None,
            metavar=flag.metavar,
            help=flag.help,
        )


def _flag_value(name: str, switch: Switch, flag: Flag) -> Callable[[str], Any]:
    """argparse ``type`` of a switch's flag: its JSON value (one entry when repeatable), checked
    now unless it is an entry (its list is checked as a whole, by ``_faults``)."""

    def value(text: str) -> Any:
        try:
            converted = flag.text(text)
            if not flag.repeatable:
                switch.parse(name, converted)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc
        return converted

    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="run the local stack in the foreground")
    up.add_argument("--port", type=int, default=None, help="default: EMULATOR_PORT or 4566")
    up.add_argument(
        "--host",
        default="127.0.0.1",
        help="an address to listen on besides 127.0.0.1, for containers (`make sam-local`: the "
        "docker bridge's gateway); never every interface",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS too, with a certificate authority of the stack's own (its PEM file: "
        "AWS_CA_BUNDLE for clients, in the `ready` line); a request's aws:SecureTransport is "
        "then its connection's",
    )
    up.add_argument("--template", default=DEFAULT_TEMPLATE)
    up.add_argument(
        "--no-deploy",
        action="store_true",
        help="start empty: `sam deploy` (AWS_ENDPOINT_URL) deploys the stack (docs/deploy.md)",
    )
    up.add_argument("--config-file", default=None, help="samconfig.toml (default: beside it)")
    up.add_argument(
        "--parameter-overrides",
        nargs="+",
        action="extend",
        default=None,
        type=_parameter_overrides,
        metavar="Key=Value",
        help="template parameters over samconfig's parameter_overrides, as SAM CLI takes them: "
        "Key=Value or ParameterKey=Key,ParameterValue=Value, several per argument or several "
        "arguments (e.g. FanOut=pipe)",
    )
    _fault_flags(up)
    up.add_argument(
        "--account-concurrency",
        type=_positive,
        default=None,
        help="invocations running at once over all functions (default: twice the cores, at "
        "least 4); more wait for a slot",
    )
    up.add_argument(
        "--log-dir",
        default=None,
        help="where each function's output goes, as <LogicalId>.log (default: .emulator/logs "
        "beside the template, shared by every stack started from it)",
    )
    up.add_argument(
        "--metrics-time-factor",
        type=_positive_float,
        default=None,
        help="CloudWatch seconds per real second for the metrics and alarms (default 60: a "
        "60 s alarm period lasts 1 s, SQS metrics are sampled every second; 1: real time)",
    )
    up.add_argument("--verbose", action="store_true", help="echo function logs with a prefix")
    up.add_argument(
        "--enforce-iam",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse a function's AWS call that its execution role does not allow, with the "
        "service's AccessDenied (default); --no-enforce-iam only records it",
    )

    invoke = sub.add_parser("invoke", help="run one function once (docker-free sam local invoke)")
    invoke.add_argument("logical_id")
    invoke.add_argument("-e", "--event", default=None, help="event JSON file ('-': stdin)")
    invoke.add_argument("-n", "--env-vars", default=None, help="SAM CLI env-vars JSON file")
    invoke.add_argument("-t", "--template", default=DEFAULT_TEMPLATE)
    invoke.add_argument("--config-file", default=None)

    report = sub.add_parser(
        "iam-report", help="per function: grants no call used, calls denied (exit 1 if any)"
    )
    report.add_argument("-t", "--template", default=DEFAULT_TEMPLATE)

    sub.add_parser(
        "filter-test", help="check a Lambda filter pattern against an event", add_help=False
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # filter-test takes its own arguments: dispatch before parsing (and import lazily).
    if argv and argv[0] == "filter-test":
        from emulator.cli import filter_test

        return int(filter_test.main(argv[1:]) or 0)
    args = _parser().parse_args(argv)
    if args.command == "up":
        from emulator.cli import up

        return up.run(args, PROCESS_START)
    if args.command == "iam-report":
        from emulator.cli import iam_report

        return iam_report.main(Path(args.template))
    from emulator.cli import invoke

    return invoke.run(args)


if __name__ == "__main__":
    sys.exit(main())
