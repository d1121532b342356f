"""DynamoDB's conformance suite (nubo-db/dynamodb-conformance: vitest, each case verified against
DynamoDB) run against the local stack, its pass count compared with the one recorded here.

The suite is not ours and is not in this repository: give a checkout of it. Its npm packages are
installed from the npm registry when it has none (without its lock file: the registry answered
404 for a version it pins, @aws-sdk/client-dynamodb-streams 3.1012.0). The local stack is the
one `make up` starts (the template deployed, fan-out lambda), on a free port; the suite creates
and deletes its own tables. Its GSI-lifecycle file is left out (minutes of waiting on index
backfills; the README's `test:quick`).

    python -m tests.conformance.dynamodb --checkout ../dynamodb-conformance [--record-new]

Exit 1 when fewer cases pass than recorded (tests/conformance/dynamodb-record.json), the cases
that fail printed; ``--record-new`` writes the count when it is higher.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from emulator.process import LocalStackProcess, fan_out_args, free_port

RECORD = Path(__file__).with_name("dynamodb-record.json")
PORTS = range(4900, 5000)
LEFT_OUT = "tests/tier2/updateTable/gsi.test.ts"
SUITE_SECONDS = 900


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, required=True, help="the suite's checkout")
    parser.add_argument("--record-new", action="store_true", help="record a higher count")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / "package.json").is_file():
        print(f"{checkout}: no package.json, not a checkout of the suite", file=sys.stderr)
        return 2
    if not (checkout / "node_modules").is_dir():
        npm = ["npm", "install", "--no-audit", "--no-fund", "--no-package-lock"]
        subprocess.run(npm, cwd=checkout, check=True)
    stack = LocalStackProcess(free_port(PORTS), up_args=fan_out_args("lambda"))
    stack.start(ports=PORTS)
    try:
        results = run_suite(checkout, stack.endpoint)
    finally:
        stack.stop()
    count = tally(results)
    record = json.loads(RECORD.read_text())
    print(summary(count), f"(recorded: {record['passed']} of {record['total']})")
    for name in count.failed:
        print(f"  fails: {name}")
    if count.passed < record["passed"]:
        print(f"fewer cases pass than recorded: {count.passed} < {record['passed']}")
        return 1
    if args.record_new and count.passed > record["passed"]:
        RECORD.write_text(json.dumps(record_of(checkout, count), indent=2) + "\n")
        print(f"recorded {count.passed} in {RECORD}")
    return 0


def run_suite(checkout: Path, endpoint: str) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "results.json"
        vitest = ["npx", "vitest", "run", "--exclude", LEFT_OUT, "--reporter=json"]
        subprocess.run(  # failing cases exit non-zero: the report counts them
            [*vitest, f"--outputFile={report}"],
            cwd=checkout,
            env=os.environ | {"DYNAMODB_ENDPOINT": endpoint} | CREDENTIALS,
            stdout=subprocess.DEVNULL,
            timeout=SUITE_SECONDS,
            check=False,
        )
        return json.loads(report.read_text())


CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class Count:
    def __init__(self) -> None:
        self.tiers: collections.Counter[str] = collections.Counter()
        self.passed_in: collections.Counter[str] = collections.Counter()
        self.failed: list[str] = []

    @property
    def passed(self) -> int:
        return sum(self.passed_in.values())

    @property
    def total(self) -> int:
        return sum(self.tiers.values())


def tally(results: dict) -> Count:
    count = Count()
    for file in results["testResults"]:
        path = file["name"].split("/tests/", 1)[1]
        tier = path.split("/", 1)[0]
        for case in file["assertionResults"]:
            count.tiers[tier] += 1
            if case["status"] == "passed":
                count.passed_in[tier] += 1
            else:
                count.failed.append(f"{path}: {case['fullName']}")
    return count


def summary(count: Count) -> str:
    tiers = ", ".join(f"{t} {count.passed_in[t]}/{count.tiers[t]}" for t in sorted(count.tiers))
    return f"{count.passed} of {count.total} pass ({tiers})"


def record_of(checkout: Path, count: Count) -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "suite": "nubo-db/dynamodb-conformance",
        "commit": commit,
        "left_out": [LEFT_OUT],
        "passed": count.passed,
        "total": count.total,
        "tiers": {t: [count.passed_in[t], count.tiers[t]] for t in sorted(count.tiers)},
        "measured": datetime.now(UTC).date().isoformat(),
    }


if __name__ == "__main__":
    sys.exit(main())
