"""What ops prints is visible text: a control or format character in stored data (a terminal
escape in an agent id written before the input contract refused it, CR/LF in an email, a bidi
override in a queue name) is printed escaped, in tables, in messages and in errors."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from shared import keys

from ops import cli, table

CALLER = "+15551234567"
HOSTILE = {
    "agent_id": "agent-7\x1b]0;owned\x07\x1b[2J",
    "queue": "bill\u202eing\r\nnext",
    "email": "pat@example.com\r\nBcc: x@example.com",
}


def put(ops_stack, item: dict) -> None:
    ops_stack.dynamodb.put_item(
        TableName=ops_stack.contacts_table, Item={k: {"S": v} for k, v in item.items()}
    )


def test_caller_show_prints_stored_control_characters_escaped(ops_stack, monkeypatch, capsys):
    ended_at = "2026-11-29T10:05:00.000Z"
    put(
        ops_stack,
        {
            "pk": keys.caller_pk(CALLER),
            "sk": keys.contact_sk(ended_at, "c-1"),
            "type": keys.CONTACT,
            "contact_id": "c-1",
            "ended_at": ended_at,
            "disposition": "RESOLVED",
            **HOSTILE,
        },
    )
    put(
        ops_stack,
        {
            **keys.last_agent_key(CALLER),
            "type": keys.LAST_AGENT,
            "agent_id": HOSTILE["agent_id"],
            "contact_id": "c-1",
            "ended_at": ended_at,
        },
    )
    monkeypatch.setattr(cli, "connect", lambda name: ops_stack)

    assert cli.main(["caller", "show", CALLER]) == 0
    out = capsys.readouterr().out
    assert all(c.isprintable() for line in out.splitlines() for c in line)
    assert out.count(r"agent-7\x1b]0;owned\x07\x1b[2J") == 2  # the last agent and the table
    assert r"bill\u202eing\r\nnext" in out and r"p***@example.com\r\nBcc: x@example.com" in out

    assert cli.main(["--json", "caller", "show", CALLER]) == 0
    shown = capsys.readouterr().out
    assert (
        "\x1b" not in shown and json.loads(shown)["last_agent"]["agent_id"] == HOSTILE["agent_id"]
    )


def test_the_global_options_work_after_the_command_too(ops_stack, monkeypatch, capsys):
    """`ops caller show ... --json --stack x`: where a newcomer types them, not refused."""
    put(
        ops_stack,
        {
            **keys.last_agent_key(CALLER),
            "type": keys.LAST_AGENT,
            "agent_id": "a-1",
            "contact_id": "c-1",
            "ended_at": "2026-11-29T08:00:00.000Z",
        },
    )
    stacks = []
    monkeypatch.setattr(cli, "connect", lambda name: stacks.append(name) or ops_stack)
    assert cli.main(["--stack", "before", "caller", "show", CALLER]) == 0
    assert "a-1" in capsys.readouterr().out
    assert cli.main(["caller", "show", CALLER, "--json", "--stack", "after"]) == 0
    assert json.loads(capsys.readouterr().out)["last_agent"]["agent_id"] == "a-1"
    assert stacks == ["before", "after"]


def test_an_error_message_is_printed_escaped(ops_stack, monkeypatch, capsys):
    monkeypatch.setattr(cli, "connect", lambda name: ops_stack)
    assert cli.main(["file", "status", "s3://other\x1b[2J/key"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and r"\x1b[2J" in err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("agent-7", "agent-7"),
        ("a b", "a b"),
        ("Kundenservice ü 東京", "Kundenservice ü 東京"),
        ("\x1b[31m", r"\x1b[31m"),
        ("a\r\nb\tc", r"a\r\nb\tc"),
        ("\u202e\u200b\u2028\x85\x7f", r"\u202e\u200b\u2028\x85\x7f"),
    ],
)
def test_visible_escapes_only_what_a_terminal_would_act_on(text, shown):
    assert table.visible(text) == shown


@given(st.text())
def test_visible_text_is_all_printable_and_printable_text_stays(text):
    shown = table.visible(text)
    assert shown.isprintable()
    if text.isprintable():
        assert shown == text


def test_a_table_cell_is_escaped_before_the_columns_are_aligned():
    rendered = table.render(("A", "B"), [("\x1b[2J", "x")])
    assert rendered.splitlines()[1] == r"\x1b[2J  x"
