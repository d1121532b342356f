"""`python -m emulator up`: deploy the template onto a local stack in this process and serve it
until stopped (the server, the function workers, the event source mapping engine)."""

# ruff: noqa: PLC0415 - imports are lazy: the command line loads only what its command runs

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def default_port() -> int:
    return int(os.environ.get("EMULATOR_PORT", "4566"))


def fault_switches(args: argparse.Namespace) -> Any:
    """The fault switches of the `up` flags (ValueError naming the switch when one is invalid)."""
    from emulator.core.faults import SWITCHES, Faults

    flags = {name: getattr(args, name, None) for name in SWITCHES}
    return Faults.from_json({name: value for name, value in flags.items() if value is not None})


def run(args: argparse.Namespace, started: float) -> int:
    from emulator.iam import access
    from emulator.lambda_.workers import DEFAULT_ACCOUNT_CONCURRENCY, Runtime
    from emulator.monitoring.monitor import DEFAULT_TIME_FACTOR
    from emulator.server import EmulatorServer
    from emulator.stack import DeployError, deploy, load_samconfig

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    template = Path(args.template).resolve()
    if not template.exists():
        print(f"error: {template} not found", file=sys.stderr)
        return 2
    config_path = Path(args.config_file) if args.config_file else template.parent / "samconfig.toml"
    region = (
        os.environ.get("AWS_DEFAULT_REGION")
        or os.environ.get("AWS_REGION")
        or load_samconfig(config_path).region
        or "us-east-1"
    )
    port = args.port if args.port is not None else default_port()
    try:
        faults = fault_switches(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = None
    # The runtime serves Lambda Invoke from the start (functions register once deployed), so an
    # early Invoke never falls through to moto's Docker path.
    runtime = Runtime(
        endpoint_url=f"http://127.0.0.1:{port}",
        account_concurrency=args.account_concurrency or DEFAULT_ACCOUNT_CONCURRENCY,
        faults=faults,
        log_dir=Path(args.log_dir) if args.log_dir else template.parent / ".emulator" / "logs",
        echo=args.verbose,
    )
    server = EmulatorServer(
        port,
        host=args.host,
        faults=faults,
        runtime=runtime,
        region=region,
        metrics_time_factor=args.metrics_time_factor or DEFAULT_TIME_FACTOR,
    )
    try:
        server.start()
        try:
            deployment = deploy(
                server.endpoint_url,
                template,
                samconfig_path=Path(args.config_file) if args.config_file else None,
                parameter_overrides=dict(
                    pair for pairs in args.parameter_overrides or () for pair in pairs
                ),
                region=region,
            )
        except DeployError as exc:
            print(f"error: deploy failed: {exc}", file=sys.stderr)
            return 1
        server.stack_name = deployment.stack_name
        server.access = access.Access(
            access.deployed_roles(deployment),
            enforce=args.enforce_iam,
            region=region,
            fingerprint=access.fingerprint(template),
            run=access.run_description(deployment.outputs.get("FanOut", "lambda")),
        )
        for spec in deployment.functions:
            runtime.register(spec)
        threading.Thread(target=runtime.warm, daemon=True).start()
        engine = server.engine = _start_engine(server.endpoint_url, region, runtime, faults)
        if not _wait_enabled(engine, stop):
            return 0 if stop.is_set() else 1
        server.ready = True
        names = ", ".join(f.logical_id for f in deployment.functions)
        print(
            f"ready {server.endpoint_url} stack={deployment.stack_name} "
            f"functions={len(deployment.functions)} ({names}) "
            f"in {time.monotonic() - started:.1f}s",
            flush=True,
        )
        for key, value in sorted(deployment.outputs.items()):
            print(f"  {key} = {value}", flush=True)
        # A timed wait: a signal delivered to another thread only runs its Python handler once
        # the main thread executes bytecode again, which an untimed wait would never do.
        while not stop.wait(0.2):
            pass
        print("stopping", file=sys.stderr, flush=True)
        return 0
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if engine is not None:
            engine.stop()
        runtime.close()
        server.stop()
        if server.access is not None:  # the run's record, for `iam-report`
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time()))
            server.access.write(template.parent / access.RECORD_DIR, f"{stamp}-{os.getpid()}.json")


def _wait_enabled(engine: Any, stop: threading.Event, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not engine.all_enabled():
        if stop.wait(0.05):
            return False
        if time.monotonic() > deadline:
            print(f"error: event source mappings not enabled in {timeout:.0f} s", file=sys.stderr)
            return False
    return True


def _start_engine(endpoint_url: str, region: str, runtime: Any, faults: Any) -> Any:
    from emulator.delivery.engine import EventSourceMappingEngine

    engine = EventSourceMappingEngine(runtime, faults, region=region, endpoint_url=endpoint_url)
    engine.start()
    return engine
