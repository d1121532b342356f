"""RouteFunction's cold start (P1, within 1.10 x boto3 with its client): it imports the layer's
modules it calls and nothing more of it, so a live call does not wait for the input model or the
S3 event parsing."""

import json
import subprocess
import sys

from bench.common import ROOT, function_env

# What the handler uses: the two id formats, the table adapter and what that needs.
ROUTE_LAYER_MODULES = {
    "shared",
    "shared.aws",
    "shared.aws.table",
    "shared.formats",
    "shared.keys",
    "shared.rules",
}

IMPORTED_FROM_THE_LAYER = """
import json, sys
import app
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "shared")))
"""


def test_route_function_imports_only_the_layer_modules_it_calls():
    function_dir = ROOT / "functions" / "route"
    env = function_env("RouteFunction")
    env["PYTHONPATH"] = f"{function_dir}:{ROOT / 'layers' / 'shared'}"
    completed = subprocess.run(
        [sys.executable, "-c", IMPORTED_FROM_THE_LAYER],
        env=env,
        cwd=function_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    assert set(json.loads(completed.stdout)) == ROUTE_LAYER_MODULES
