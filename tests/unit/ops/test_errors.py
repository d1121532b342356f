"""Where a newcomer stumbles, `python -m ops` says what is wrong and what to do, exit 2: no stack
answering at AWS_ENDPOINT_URL, a replay of a function that reads no stream, a notification id
that is not KIND#contact_id."""

import socket
import time

import pytest

from ops.cli import STREAM_READERS, main, parser


@pytest.fixture
def nothing_listening(monkeypatch) -> str:
    """AWS_ENDPOINT_URL at a local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    return endpoint


def test_no_stack_answering_says_so_at_once_and_suggests_make_up(nothing_listening, capsys):
    started = time.monotonic()
    assert main(["status"]) == 2
    elapsed = time.monotonic() - started
    error = capsys.readouterr().err
    assert f"no stack answering at {nothing_listening}" in error
    assert "make up" in error
    assert "Traceback" not in error
    assert elapsed < 6, f"{elapsed:.1f} s: the clients' retries (~9 s) were spent first"


def test_a_replay_of_a_function_that_reads_no_stream_is_refused_naming_the_readers(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["stream", "replay", "--function", "IngestFunction"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "'IngestFunction'" in error
    assert all(reader in error for reader in STREAM_READERS), error


def test_each_stream_reader_is_a_replay_target():
    for reader in STREAM_READERS:
        assert parser().parse_args(["stream", "replay", "--function", reader]).function == reader


@pytest.mark.parametrize("wrong", ["SURVEY-c-1001", "SURVEY#", "#c-1001"])
def test_a_notification_id_that_is_not_kind_hash_contact_id_is_refused(wrong, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["idempotency", "show", "NotifierFunction", "--notification-id", wrong])
    assert exit_.value.code == 2
    assert "expected KIND#contact_id" in capsys.readouterr().err


def test_a_notification_id_of_kind_hash_contact_id_is_taken():
    argv = ["idempotency", "purge", "NotifierFunction", "--notification-id", "SURVEY#c-1001"]
    assert parser().parse_args(argv).notification_id == "SURVEY#c-1001"
