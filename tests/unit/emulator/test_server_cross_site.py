"""Web pages cannot write to the local stack (issue 43, item 4): a request a browser sends for a
page of another site (an ``Origin`` that is not the stack's own, ``Sec-Fetch-Site: cross-site``
or ``same-site``) is refused with 403 and changes nothing when it would change state (any method
but GET, HEAD and OPTIONS; any call to /moto-api/ or /_emulator/), as is a request addressed to a
name that is not the stack's (DNS rebinding). Browsers send these without a CORS preflight
("simple requests": a form POST, a text/plain POST), so CORS alone does not stop them. boto3, the
AWS CLI, the tests and the harness send no Origin or Sec-Fetch-* header: their calls go on, as do
a page's of the stack's own origin (moto's dashboard)."""

import http.client
import json
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from emulator.server import EmulatorServer
from tests.unit.emulator.support import endpoint_client

pytestmark = pytest.mark.usefixtures("module_credentials")

BUCKET = "contacts"
EVIL = "https://evil.example"
REFUSED = "cross-site request refused by the local stack"


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    running = EmulatorServer(0)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def s3(server):
    """The bucket with one object, readable by anyone (an unsigned GET, as a browser's, of a
    private object is refused by S3 itself), on a stack of nothing else (moto's state is the
    process's: another test's is reset)."""
    assert send(server, "POST", "/moto-api/reset", {})[0] == 200
    client = endpoint_client("s3", server.endpoint_url)
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key="incoming/kept.csv", Body=b"kept", ACL="public-read")
    return client


def port(server) -> int:
    return server.get_host_and_port()[1]


def own_host(server) -> str:
    return f"127.0.0.1:{port(server)}"


def send(server, method: str, path: str, headers: dict, body: bytes | str = b""):
    connection = http.client.HTTPConnection("127.0.0.1", port(server), timeout=10)
    connection.request(method, path, body=body, headers={"Host": own_host(server), **headers})
    response = connection.getresponse()
    return response.status, response.read()


def keys(s3) -> set[str]:
    return {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def form_upload(key: str) -> tuple[dict, bytes]:
    """What a browser sends for an HTML form (enctype multipart/form-data) posted to the bucket:
    S3's POST Object, the key a field, the file the last."""
    boundary = "----WebKitFormBoundaryX"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="key"\r\n\r\n{key}\r\n',
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="c.csv"\r\n'
        "Content-Type: text/csv\r\n\r\ncontact_id,agent_id\r\nc1,evil\r\n",
        f"--{boundary}--\r\n",
    ]
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    return headers, "".join(parts).encode()


# What a browser adds to a request a page of another site makes.
CROSS_SITE = [
    pytest.param({"Origin": EVIL}, id="origin"),
    pytest.param({"Origin": "null"}, id="opaque-origin"),  # file://, a sandboxed frame
    pytest.param({"Sec-Fetch-Site": "cross-site"}, id="sec-fetch-site-cross"),
    pytest.param({"Sec-Fetch-Site": "same-site"}, id="sec-fetch-site-same-site"),
    pytest.param({"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}, id="both"),
    pytest.param({"Origin": "http://127.0.0.1:1"}, id="another-local-port"),
    pytest.param({"Origin": "http://localhost:3000"}, id="a-local-dev-server"),
]


@pytest.mark.parametrize("browser", CROSS_SITE)
def test_a_form_post_to_the_bucket_is_refused_and_creates_nothing(server, s3, browser):
    headers, body = form_upload("incoming/csrf.csv")
    status, answer = send(server, "POST", f"/{BUCKET}", headers | browser, body)
    assert status == 403
    assert REFUSED in answer.decode()
    assert b"<Code>AccessDenied</Code>" in answer  # S3's own error: the browser's call is S3's
    assert keys(s3) == {"incoming/kept.csv"}


@pytest.mark.parametrize("browser", CROSS_SITE)
def test_a_text_plain_delete_and_put_are_refused(server, s3, browser):
    text = {"Content-Type": "text/plain"}
    assert send(server, "DELETE", f"/{BUCKET}/incoming/kept.csv", browser)[0] == 403
    assert send(server, "PUT", f"/{BUCKET}/incoming/put.csv", text | browser, b"x")[0] == 403
    # the multi-object delete as a text/plain POST
    delete = "<Delete><Object><Key>incoming/kept.csv</Key></Object></Delete>"
    assert send(server, "POST", f"/{BUCKET}?delete", text | browser, delete)[0] == 403
    assert keys(s3) == {"incoming/kept.csv"}


@pytest.mark.parametrize("browser", CROSS_SITE)
def test_a_text_plain_post_to_the_fault_switches_changes_none(server, browser):
    before = server.faults.snapshot()
    text = {"Content-Type": "text/plain"}
    switch = json.dumps({"duplicate_deliveries": 3})
    status, answer = send(server, "POST", "/_emulator/faults", text | browser, switch)
    assert status == 403
    assert REFUSED in json.loads(answer)["message"]
    assert send(server, "POST", "/_emulator/faults/reset", text | browser)[0] == 403
    assert send(server, "POST", "/_emulator/reset", text | browser)[0] == 403
    assert server.faults.snapshot() == before


@pytest.mark.parametrize("browser", CROSS_SITE)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/moto-api/reset"),
        ("GET", "/moto-api/reset"),  # moto resets on POST only; refused all the same
        ("GET", "/moto-api/seed?a=1"),  # a GET that changes moto's state
        ("GET", "/moto-api/recorder/start-recording"),
        ("GET", "/moto-api/"),  # moto's dashboard page itself
    ],
)
def test_moto_api_is_refused_to_other_sites_and_keeps_the_state(server, s3, browser, method, path):
    status, answer = send(server, method, path, browser)
    assert status == 403
    assert REFUSED in json.loads(answer)["message"]
    assert keys(s3) == {"incoming/kept.csv"}  # the bucket and its object are still there


def test_the_refusal_says_how_to_call_instead(server, s3):
    _, answer = send(server, "POST", "/_emulator/faults", {"Origin": EVIL}, "{}")
    message = json.loads(answer)["message"]
    assert "\n" not in message
    assert "'https://evil.example'" in message
    assert "AWS SDK" in message and "AWS CLI" in message


def test_a_cross_site_read_is_still_answered(server, s3):
    """A page of another site reads nothing (no CORS) and changes nothing with a GET of S3: the
    developer's link to an object still opens."""
    status, answer = send(server, "GET", f"/{BUCKET}/incoming/kept.csv", {"Origin": EVIL})
    assert (status, answer) == (200, b"kept")
    status, _ = send(server, "GET", "/_emulator/status", {"Sec-Fetch-Site": "cross-site"})
    assert status == 403  # the control endpoints: to the stack's own pages and to clients only


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}"])
def test_a_rebound_name_is_refused_and_changes_nothing(server, s3, host):
    """A page of evil.example whose name now resolves to 127.0.0.1 (DNS rebinding) is the same
    origin as its own requests: no Origin tells it apart, its Host does."""
    before = server.faults.snapshot()
    named = {"Host": host.format(port=port(server))}
    headers, body = form_upload("incoming/csrf.csv")
    assert send(server, "POST", f"/{BUCKET}", headers | named, body)[0] == 403
    assert send(server, "POST", "/_emulator/faults", named, '{"duplicate_deliveries": 3}')[0] == 403
    assert send(server, "POST", "/moto-api/reset", named)[0] == 403
    assert keys(s3) == {"incoming/kept.csv"}
    assert server.faults.snapshot() == before


def test_boto3_without_browser_headers_still_writes(server, s3):
    s3.put_object(Bucket=BUCKET, Key="incoming/sdk.csv", Body=b"x")
    s3.delete_object(Bucket=BUCKET, Key="incoming/kept.csv")
    assert keys(s3) == {"incoming/sdk.csv"}
    sqs = endpoint_client("sqs", server.endpoint_url)
    assert sqs.create_queue(QueueName="q")["QueueUrl"].endswith("/q")


def test_clients_without_browser_headers_still_use_the_controls(server, s3):
    """What the harness and the docs' curl commands send: no Origin, no Sec-Fetch-*."""
    status, answer = send(server, "POST", "/_emulator/faults", {}, '{"duplicate_deliveries": 2}')
    assert status == 200 and json.loads(answer)["duplicate_deliveries"] == 2
    assert send(server, "POST", "/_emulator/faults/reset", {})[0] == 200
    assert send(server, "POST", "/moto-api/reset", {})[0] == 200
    with pytest.raises(ClientError, match="NoSuchBucket"):
        s3.list_objects_v2(Bucket=BUCKET)  # moto's reset did reset


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(lambda server: {"Origin": f"http://127.0.0.1:{port(server)}"}, id="origin"),
        pytest.param(
            lambda server: {
                "Origin": f"http://127.0.0.1:{port(server)}",
                "Sec-Fetch-Site": "same-origin",
            },
            id="origin-and-sec-fetch",
        ),
        pytest.param(lambda server: {"Sec-Fetch-Site": "none"}, id="typed-in-the-address-bar"),
    ],
)
def test_the_stacks_own_pages_still_write(server, s3, page):
    """moto's dashboard (/moto-api/) is served by the stack: its requests are same-origin."""
    headers = page(server)
    text = {"Content-Type": "text/plain"}
    status, _ = send(server, "PUT", f"/{BUCKET}/incoming/own.csv", text | headers, b"x")
    assert status == 200
    form, body = form_upload("incoming/form.csv")  # the form the other sites' tests send
    assert send(server, "POST", f"/{BUCKET}", form | headers, body)[0] in (200, 204)
    status, _ = send(server, "POST", "/_emulator/faults", text | headers, "{}")
    assert status == 200
    assert send(server, "GET", "/moto-api/data.json", headers)[0] == 200
    assert keys(s3) == {"incoming/kept.csv", "incoming/own.csv", "incoming/form.csv"}
    assert send(server, "POST", "/moto-api/reset", headers)[0] == 200
