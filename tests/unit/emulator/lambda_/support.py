"""What the Lambda runtime's tests share (not a test module): a function on disk, its code and
its layer, whose handler does what the event asks."""

import textwrap
from pathlib import Path

from emulator.lambda_.workers import FunctionSpec

HANDLER = textwrap.dedent(
    """
    import json, os, sys, time, uuid

    INSTANCE = uuid.uuid4().hex  # one per execution environment (cold start)
    CALLS = 0

    def lambda_handler(event, context):
        global CALLS
        CALLS += 1
        action = event.get("action")
        if action == "raise":
            raise KeyError("missing thing")
        if action == "sleep":
            print("sleeping", flush=True)
            time.sleep(event["seconds"])
        if action == "exit":
            os._exit(3)
        if action == "exit_mid_line":  # as a SIGKILL between print's text and its newline
            sys.stdout.write("half a line")
            sys.stdout.flush()
            os._exit(3)
        if action == "side_effect":
            with open(event["path"], "a") as out:
                out.write(context.aws_request_id + "\\n")
        if action == "print":
            print("hello from", context.function_name)
        before = context.get_remaining_time_in_millis()
        if action == "remaining":
            time.sleep(0.2)
        return {
            "instance": INSTANCE,
            "calls": CALLS,
            "remaining_before": before,
            "remaining_after": context.get_remaining_time_in_millis(),
            "function_name": context.function_name,
            "memory_limit_in_mb": context.memory_limit_in_mb,
            "invoked_function_arn": context.invoked_function_arn,
            "aws_request_id": context.aws_request_id,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "sys_path": sys.path,
        }
    """
)


def make_function(root: Path, logical_id: str, **kwargs) -> FunctionSpec:
    code = root / logical_id / "code"
    layer = root / logical_id / "layer"
    code.mkdir(parents=True)
    (layer / "helper").mkdir(parents=True)
    (code / "app.py").write_text(HANDLER)
    (layer / "helper" / "__init__.py").write_text("VALUE = 42\n")
    defaults = {
        "function_name": f"stack-{logical_id}-ABC",
        "handler": "app.lambda_handler",
        "code_dir": code,
        "layer_dirs": [layer],
        "environment": {"TABLE_NAME": f"{logical_id}-table"},
        "timeout": 3.0,
        "memory_size": 256,
    }
    defaults.update(kwargs)
    return FunctionSpec(logical_id=logical_id, **defaults)
