"""The docs run: every `bash` block of README.md, docs/ and pipeline/README.md is executed against
the local stack, and what the docs say it shows is asserted, so a doc that drifts from the code
fails `make test`. The convention is in docs/architecture.md ("Docs that run").

Blocks run four at a time (each must be self-contained) with `bash -euo pipefail` from the
repository root, with EMULATOR_PORT the session's local stack's port (the blocks' endpoint is
`http://127.0.0.1:${EMULATOR_PORT:-4566}`, as a reader's `EMULATOR_PORT=4570 make up` needs), the
tools of `make setup` (.tools/bin: sam, aws) on PATH and none of the caller's AWS settings. A
block that reaches beyond the local stack fails, even if it hides the error: its HTTP(S) proxy is
a listener that records the attempt and forwards nothing (the AWS CLI v1 sends `aws sqs` to
queue.amazonaws.com whatever AWS_ENDPOINT_URL says, and a developer's ~/.aws credentials would
make that a call to their account).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.stack import StackClient
from tests.doc_blocks import ROOT, Block, blocks

DOCS = sorted([ROOT / "README.md", ROOT / "pipeline" / "README.md", *(ROOT / "docs").glob("*.md")])
BLOCK_TIMEOUT = 300
PARALLEL_BLOCKS = 4

pytestmark = pytest.mark.integration


ALL_BLOCKS = [block for path in DOCS for block in blocks(path)]
RUNNABLE = [block for block in ALL_BLOCKS if block.language == "bash" and not block.skip]


# A port written into a block: the reader's EMULATOR_PORT (and this suite's stack) would miss it.
FIXED_PORT = re.compile(r"(?<!EMULATOR_PORT:-)\b4566\b")


def test_every_block_finds_the_local_stack_by_emulator_port():
    fixed = [
        f"{block.name}: {line.strip()}"
        for block in ALL_BLOCKS
        if block.language == "bash"
        for line in block.text.splitlines()
        if FIXED_PORT.search(line.split("#", 1)[0])
    ]
    assert not fixed, (
        f"use http://127.0.0.1:${{EMULATOR_PORT:-4566}} (or $AWS_ENDPOINT_URL): {fixed}"
    )


def test_every_block_says_what_it_is():
    bare = [block.name for block in ALL_BLOCKS if not block.language]
    assert not bare, f"bare fences (use bash, or text/json/yaml/sql/mermaid): {bare}"
    misplaced = [b.name for b in ALL_BLOCKS if b.language != "bash" and (b.skip or b.expects)]
    assert not misplaced, f"doc-test annotations on blocks that never run: {misplaced}"
    assert RUNNABLE, "no runnable block found: is the parser broken?"


@pytest.fixture(scope="module")
def outcomes(stack: StackClient) -> dict[str, subprocess.CompletedProcess]:
    """Every runnable block, run once, four at a time (they are independent: each names its own
    data), so the docs cost a minute of the suite, not three."""
    if not stack.is_local:
        pytest.skip("the docs' local commands run against the local stack")
    try:
        with ThreadPoolExecutor(max_workers=PARALLEL_BLOCKS) as pool:
            ran = pool.map(lambda block: run_block(stack, block), RUNNABLE)
            return {block.name: done for block, done in zip(RUNNABLE, ran, strict=True)}
    finally:
        stack.reset_faults()  # a block may set fault switches; the next tests start clean


class OutsideCalls:
    """A block's HTTP(S) proxy that forwards nothing: each request that reaches it (anything but
    the local stack's names, NO_PROXY) is recorded by its request line and refused."""

    LOCAL_NAMES = "127.0.0.1,localhost,::1"

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.attempts: list[str] = []
        threading.Thread(target=self._refuse, daemon=True).start()

    def env(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
        return dict.fromkeys(names, proxy) | dict.fromkeys(
            ("NO_PROXY", "no_proxy"), self.LOCAL_NAMES
        )

    def _refuse(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed: the block is done
                return
            with connection:
                connection.settimeout(5)
                request = connection.recv(4096).split(b"\r\n", 1)[0]
                self.attempts.append(request.decode(errors="replace"))
                connection.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")


def run_block(stack: StackClient, block: Block) -> subprocess.CompletedProcess:
    assert stack.local
    port = str(stack.local.port)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "EMULATOR_"))}
    env["PATH"] = os.pathsep.join([str(ROOT / ".tools" / "bin"), env.get("PATH", "")])
    env["EMULATOR_PORT"] = port
    outside = OutsideCalls()
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=ROOT,
            env=env | outside.env(),
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
    finally:
        outside.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        outside.listener.close()
    if outside.attempts:  # a failure, even if the block went on or hid the error
        done.returncode = done.returncode or 1
        done.stderr += f"\nreached beyond the local stack: {outside.attempts}"
    return done


# The README's line that points a new shell's AWS clients at the local stack.
ENV_LINE = next(
    line
    for block in RUNNABLE
    if block.path.name == "README.md"
    for line in block.text.splitlines()
    if line.startswith("export AWS_ENDPOINT_URL=")
)
# A doc's promise that AWS clients reach the local stack through AWS_ENDPOINT_URL alone.
ENDPOINT_CLAIM = re.compile(r"\b(any|every) AWS client (with|pointed at|works)\b")


def test_aws_sqs_needs_endpoint_url_and_every_doc_that_promises_aws_endpoint_url_says_so(
    stack: StackClient,
):
    """The pinned AWS CLI v1 sends `aws sqs` to queue.amazonaws.com whatever AWS_ENDPOINT_URL
    says (awscli/customizations/overridesslcommonname.py fills in --endpoint-url when none is
    given, before AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_SQS or a config file's endpoint_url are
    read), so a doc that promises every AWS client the local stack through AWS_ENDPOINT_URL must
    name that exception and its --endpoint-url."""
    if not stack.is_local:
        pytest.skip("the AWS CLI's endpoint against the local stack")
    as_printed = Block(ROOT / "README.md", 0, "bash", f"{ENV_LINE}\naws sqs list-queues")
    ignored = run_block(stack, as_printed)
    assert ignored.returncode != 0, ignored.stdout
    assert "reached beyond the local stack" in ignored.stderr, ignored.stderr[-2000:]
    as_documented = Block(
        ROOT / "README.md",
        0,
        "bash",
        f'{ENV_LINE}\naws sqs list-queues --endpoint-url "$AWS_ENDPOINT_URL" --output text',
    )
    given = run_block(stack, as_documented)
    assert given.returncode == 0, given.stdout + given.stderr
    assert stack.outputs["NotificationQueueUrl"].rsplit("/", 1)[1] in given.stdout

    silent = [
        f"{path.relative_to(ROOT)}: ...{text[max(claim.start() - 40, 0) : claim.end() + 80]}..."
        for path in DOCS
        for paragraph in re.split(r"\n\s*\n", path.read_text())
        if (claim := ENDPOINT_CLAIM.search(text := " ".join(paragraph.split())))
        and "aws sqs" not in paragraph
    ]
    assert not silent, f"promise every AWS client the local stack, aws sqs included: {silent}"


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_documented_commands_run_and_show_what_the_docs_say(outcomes, block: Block):
    done = outcomes[block.name]
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"exit {done.returncode}:\n{output[-4000:]}"
    for pattern in block.expects:
        assert re.search(pattern, output), f"no match for {pattern!r} in:\n{output[-4000:]}"
