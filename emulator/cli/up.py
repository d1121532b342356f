"""`python -m emulator up`: deploy the template onto a local stack in this process and serve it
until stopped (the server, the function workers, the event source mapping engine). With
`--no-deploy` it starts empty, for `sam deploy` to deploy onto (AWS_ENDPOINT_URL); a stack a
CloudFormation client deploys, in either mode, runs as one `up` deploys (``_follow_stacks``)."""

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
    from emulator.deploy import errors, samconfig
    from emulator.iam import access
    from emulator.lambda_.workers import DEFAULT_ACCOUNT_CONCURRENCY, Runtime
    from emulator.monitoring.monitor import DEFAULT_TIME_FACTOR
    from emulator.server import EmulatorServer

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
        or samconfig.load_samconfig(config_path).region
        or "us-east-1"
    )
    port = args.port if args.port is not None else default_port()
    try:
        faults = fault_switches(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = unfollow = None
    certificates = _certificates(args, template.parent, port)
    # The runtime serves Lambda Invoke from the start (functions register once deployed), so an
    # early Invoke never falls through to moto's Docker path.
    runtime = Runtime(
        endpoint_url=f"{'http' if certificates is None else 'https'}://127.0.0.1:{port}",
        ca_bundle=None if certificates is None else certificates.authority,
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
        certificates=certificates,
    )
    try:
        server.start()
        try:
            deployment = _deploy(server, runtime, args, template, region)
        except errors.DeployError as exc:
            print(f"error: deploy failed: {exc}", file=sys.stderr)
            return 1
        engine = _start_engine(server, region, runtime, faults)
        unfollow = _follow_stacks(server, engine, runtime, args, template)
        if not _wait_enabled(engine, stop):
            return 0 if stop.is_set() else 1
        server.mark_ready()
        if certificates is not None:  # before `ready`, which clients wait for
            print(f"tls AWS_CA_BUNDLE={certificates.authority}", flush=True)
        _announce("ready", server.endpoint_url, deployment, time.monotonic() - started)
        # A timed wait: a signal delivered to another thread only runs its Python handler once
        # the main thread executes bytecode again, which an untimed wait would never do.
        while not stop.wait(0.2):
            pass
        # The stack lives in this process's memory: say so where the developer sees it go.
        print(
            "stopping: every bucket, table and queue of the local stack is discarded (a file in "
            "progress too); the next start deploys an empty stack",
            file=sys.stderr,
            flush=True,
        )
        return 0
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if unfollow is not None:
            unfollow()
        if engine is not None:
            engine.stop()
        runtime.close()
        server.stop()
        if server.access is not None:  # the run's record, for `iam-report`
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time()))
            server.access.write(template.parent / access.RECORD_DIR, f"{stamp}-{os.getpid()}.json")


def _certificates(args: argparse.Namespace, project: Path, port: int) -> Any:
    """With --tls, a new authority and server certificate for the stack's names (in
    .emulator/tls/<port>), trusted by this process's clients (the deployer, the engine) and the
    workers (AWS_CA_BUNDLE); None without."""
    if not args.tls:
        return None
    from emulator.core import tls
    from emulator.server import LOCAL_NAMES

    names = {*LOCAL_NAMES, "*.localhost", args.host}
    certificates = tls.issue(project / ".emulator" / "tls" / str(port), names)
    os.environ["AWS_CA_BUNDLE"] = str(certificates.authority)
    return certificates


def _deploy(
    server: Any, runtime: Any, args: argparse.Namespace, template: Path, region: str
) -> Any:
    """The template deployed as samconfig and the overrides say, and served; None with
    --no-deploy (DeployError as ``deploy`` raises it)."""
    from emulator.deploy.deployer import deploy

    if args.no_deploy:
        return None
    deployment = deploy(
        server.endpoint_url,
        template,
        samconfig_path=Path(args.config_file) if args.config_file else None,
        parameter_overrides=dict(
            pair for pairs in args.parameter_overrides or () for pair in pairs
        ),
        region=region,
    )
    _serve(server, runtime, deployment, args, template)
    return deployment


def _serve(server: Any, runtime: Any, deployment: Any, args: argparse.Namespace, template: Path):
    """``deployment``'s functions on the runtime (warmed in the background), IAM checked against
    their roles: the stack the server serves."""
    from emulator.iam import access

    checks = access.Access(
        access.deployed_roles(deployment),
        enforce=args.enforce_iam,
        region=deployment.region,
        fingerprint=access.fingerprint(template),
        run=access.run_description(deployment.outputs.get("FanOut", "lambda")),
    )
    server.serve(deployment.stack_name, checks)
    for spec in deployment.functions:
        runtime.register(spec)
    threading.Thread(target=runtime.warm, daemon=True).start()


def _follow_stacks(
    server: Any, engine: Any, runtime: Any, args: argparse.Namespace, template: Path
) -> Any:
    """Each stack a change set deploys (`sam deploy`) taken over as ``deploy`` would leave it
    (deployer.adopt: the gaps closed, the functions from the artifacts it uploaded) and served,
    its event source mappings running before ExecuteChangeSet answers; a deleted one no longer
    served. Returns the function that stops following."""
    from emulator.deploy.deployer import adopt
    from emulator.services import cloudformation

    artifacts = template.parent / ".emulator" / "artifacts"

    def follow(operation: str, stack_name: str, region: str) -> None:
        started = time.monotonic()
        if operation == "DELETE":
            server.stack_deleted(stack_name)
            print(f"deleted stack={stack_name}", flush=True)
            return
        deployment = adopt(server.endpoint_url, stack_name, region=region, artifacts_dir=artifacts)
        if not deployment.functions:  # a stack of its own (an artifacts bucket): nothing to run
            return
        _serve(server, runtime, deployment, args, template)
        engine.refresh()
        deadline = time.monotonic() + 60
        while not engine.all_enabled():
            if time.monotonic() > deadline:
                raise RuntimeError("event source mappings not enabled in 60 s")
            time.sleep(0.05)
        _announce(operation.lower(), server.endpoint_url, deployment, time.monotonic() - started)

    return cloudformation.on_stack_change(follow)


def _announce(what: str, endpoint_url: str, deployment: Any, seconds: float) -> None:
    """`<what> <endpoint> stack=<name> functions=N (...) in Xs`, then its outputs; with no
    deployment, `stack=-` and where `sam deploy` deploys to."""
    if deployment is None:
        print(
            f"{what} {endpoint_url} stack=- (none yet: `sam deploy` with"
            f" AWS_ENDPOINT_URL={endpoint_url}) in {seconds:.1f}s",
            flush=True,
        )
        return
    names = ", ".join(f.logical_id for f in deployment.functions)
    print(
        f"{what} {endpoint_url} stack={deployment.stack_name} "
        f"functions={len(deployment.functions)} ({names}) in {seconds:.1f}s",
        flush=True,
    )
    for key, value in sorted(deployment.outputs.items()):
        print(f"  {key} = {value}", flush=True)


def _wait_enabled(engine: Any, stop: threading.Event, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not engine.all_enabled():
        if stop.wait(0.05):
            return False
        if time.monotonic() > deadline:
            print(f"error: event source mappings not enabled in {timeout:.0f} s", file=sys.stderr)
            return False
    return True


def _start_engine(server: Any, region: str, runtime: Any, faults: Any) -> Any:
    """The event source mapping engine, started and reported by ``server``'s status."""
    from emulator.delivery.engine import EventSourceMappingEngine

    engine = EventSourceMappingEngine(
        runtime, faults, region=region, endpoint_url=server.endpoint_url
    )
    engine.start()
    server.attach_engine(engine)
    return engine
