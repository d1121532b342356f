"""docs/operations.md's Logs Insights queries, run on the local stack's logs: each query's filter
(and its `fields`, `parse` and `stats` names) emulated on the JSON lines this test made the
functions write at the shipped LogLevel=INFO, so a message or field renamed in the code and not
in the doc (or logged only at DEBUG) fails here."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from shared import keys

from harness import trace
from harness.builders import contact, new_caller
from harness.stack import StackClient
from tests.integration.support import LOG_DIR, LONG_WAIT, wait_for_notifications

pytestmark = [pytest.mark.integration, pytest.mark.fan_out_independent]

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
# The doc's example key in "Why was this file rejected?": the test puts its own file there.
EXAMPLE_KEY = "incoming/2026-11-29/contacts.jsonl"


def documented_queries() -> list[str]:
    """The ```sql blocks of the "CloudWatch Logs Insights" section."""
    text = OPERATIONS.read_text()
    section = text[text.index("### CloudWatch Logs Insights") :]
    section = section[: section.index("\n### ", 1)]
    return re.findall(r"```sql\n(.*?)```", section, re.DOTALL)


def logged_table() -> str:
    text = OPERATIONS.read_text()
    return text[text.index("### What each function logs") : text.index("### CloudWatch Logs")]


# -- the part of the Logs Insights query language the doc uses ------------------------------------
TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<regex>/(?:[^/\\]|\\.)*/)'
                   r"|(?P<list>\[[^\]]*\])|(?P<op>!=|=)|(?P<word>@?[\w.]+))")  # fmt: skip


def tokens(expression: str) -> list[tuple[str, str]]:
    found, position = [], 0
    while position < len(expression.rstrip()):
        match = TOKEN.match(expression, position)
        assert match, f"cannot read {expression[position:]!r}"
        found.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    return found


def value(line: dict, raw: str, name: str):
    if name == "@message":
        return raw
    for part in name.split("."):
        line = line.get(part) if isinstance(line, dict) else None
    return line


def matches(expression: str, line: dict, raw: str) -> bool:
    """`a = "x"`, `a != "x"`, `a like "part"`, `a like /regex/`, `a in [...]`, joined by `and`
    (binding first) and `or`."""
    words = tokens(expression)
    clauses, clause = [[]], []
    for kind, text in words:
        if kind == "word" and text in ("and", "or"):
            clauses[-1].append(clause)
            clause = []
            if text == "or":
                clauses.append([])
        else:
            clause.append((kind, text))
    clauses[-1].append(clause)
    return any(all(_holds(c, line, raw) for c in conjunction) for conjunction in clauses)


def _holds(clause: list[tuple[str, str]], line: dict, raw: str) -> bool:
    (_, name), (_, operator), (kind, operand) = clause
    found = value(line, raw, name)
    if operator in ("=", "!="):
        return (found == json.loads(operand)) == (operator == "=")
    if operator == "like":
        if kind == "regex":
            return found is not None and re.search(operand[1:-1], str(found)) is not None
        return found is not None and json.loads(operand) in str(found)
    if operator == "in":
        return found in json.loads(operand)
    raise AssertionError(f"operator {operator!r} not emulated")


def named_fields(command: str) -> list[str]:
    """The fields a `fields` or `stats` command names (not @-fields, not functions)."""
    if command.startswith("fields "):
        return [name.strip() for name in command[7:].split(",") if not name.strip().startswith("@")]
    if command.startswith("stats "):
        inside = re.findall(r"(?:sum|avg|min|max|count_distinct)\((\w+)\)", command)
        by = command.split(" by ", 1)[1].split(",") if " by " in command else []
        return [*inside, *(name.strip() for name in by if "(" not in name)]
    return []


def test_every_documented_query_finds_this_runs_lines(
    local_stack: StackClient, files, topic, contact_cleanup
):
    offsets = trace.offsets_now([LOG_DIR])
    functions = {
        f["FunctionName"] for f in local_stack.client("lambda").list_functions()["Functions"]
    }
    surveyed, waited = new_caller(), new_caller()
    contact_cleanup.extend([surveyed, waited])
    survey = contact(surveyed, disposition="RESOLVED", email="q@example.com", survey_opt_in=True)
    gift = contact(waited, minutes=3, disposition="ESCALATED", wait_seconds=LONG_WAIT)

    local_stack.faults(duplicate_deliveries=2)  # the duplicates the doc's query counts
    key, _ = files.put_jsonl("queries.jsonl", [survey, gift, "not a contact"])
    local_stack.reset_faults()
    local_stack.client("sqs").send_message(
        QueueUrl=local_stack.outputs["IngestQueueUrl"], MessageBody='{"not": "an S3 event"}'
    )
    wait_for_notifications(
        local_stack,
        topic,
        Counter({(keys.SURVEY, survey["contact_id"]): 1, (keys.GIFT_CARD, gift["contact_id"]): 1}),
    )
    local_stack.route(surveyed)

    lines = []
    for path in trace.log_files([LOG_DIR]):
        with path.open() as log:
            log.seek(offsets.get(path, 0))
            for raw in log:
                try:
                    line = json.loads(raw)
                except ValueError:
                    line = {}  # Lambda's own plain-text lines: @message only
                if line.get("function_name", "") in functions or not line:
                    lines.append((line, raw))
    table = logged_table()

    queries = documented_queries()
    assert len(queries) >= 6
    for documented in queries:
        query = documented.replace(EXAMPLE_KEY, key)
        commands = [command.strip() for command in query.strip().split("\n|")]
        found = lines
        for command in commands:
            if command.startswith("filter "):
                found = [(line, raw) for line, raw in found if matches(command[7:], line, raw)]
        assert found, f"no line of this run matches the query:\n{query}"
        for name in (name for command in commands for name in named_fields(command)):
            assert any(name in line for line, _ in found) or f"`{name}`" in table, (
                f"{name!r}: not in the lines the query finds, nor in the doc's table:\n{query}"
            )
        for command in commands:
            parse = re.match(r'parse (\w+) "(.*)\*" as \w+', command)
            if parse:
                field, prefix = parse.groups()
                assert any(str(line.get(field, "")).startswith(prefix) for line, _ in found)
    surveys = [
        line for line, _ in lines
        if line.get("message") == "notification sent" and line.get("kind") == "SURVEY"
    ]  # fmt: skip
    assert f"SURVEY#{survey['contact_id']}" in {line["notification_id"] for line in surveys}
