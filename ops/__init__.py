"""The operator's command line (`uv run python -m ops <command>`): status, DLQ redrive, replay of
failed stream batches, idempotency records, file reprocessing and a caller's history, for a
deployed stack (boto3's usual credentials and region) and the local stack alike
(AWS_ENDPOINT_URL pointing at it).

Built on its own stack client (ops/stack.py: the stack's outputs, queues, table and resources;
ops/fan_out.py: the fan-out modes) and the layer's own modules (keys, idempotency claims,
S3 messages); never on the local stack's internals nor the tooling (harness, bench, tests:
ops/ruff.toml), which may use ops.
"""

import sys
from pathlib import Path

# The layer is not a distribution: on Lambda it is /opt/python, here its source directory; ops
# reads its keys, rules and idempotency claims from it, as the functions do.
_LAYER = str(Path(__file__).resolve().parents[1] / "layers" / "shared")
if _LAYER not in sys.path:
    sys.path.insert(0, _LAYER)
