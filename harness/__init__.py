"""The stack client: what the demo (`make run`, `make chaos`), the end-to-end benchmark (P5) and
the integration tests share when they drive a stack from outside, as any AWS client would; and
what the unit tests and the benchmarks share when they call a handler in process.

- stack: outputs, samconfig, queues, table, route, mappings and the local stack's controls
- topic: a subscriber of NotificationsTopic that keeps what it received
- expected: what a set of input rows must produce, by the layer's own rules
- builders: input rows, files and Amazon Connect events
- events: events as AWS delivers them to a function called in process (items, stream records,
  SQS events, S3 notifications)
- in_process: the stack's resources in moto in process, a handler loaded cold, a Lambda context
- metrics: the functions' EMF metrics, read from the local stack's function logs
- polling: bounded waits
- demo: `python -m harness.demo`

The harness may import the emulator (to start a local stack) and the layer's pure modules; the
application never imports the harness.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The layer is not a distribution: on Lambda it is /opt/python, here its source directory. Its
# pure modules (keys, rules, model) are the single source of the table keys and the rules.
_LAYER = str(ROOT / "layers" / "shared")
if _LAYER not in sys.path:
    sys.path.insert(0, _LAYER)
