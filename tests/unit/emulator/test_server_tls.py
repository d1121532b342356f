"""The local stack over TLS (`up --tls`): HTTPS with a certificate of the stack's own authority,
plain HTTP still answered on the same port, and each request's aws:SecureTransport its
connection's, so the template's DenyInsecureTransport denies what it denies on AWS: a test's
call and a function worker's alike."""

import ssl
import textwrap
import urllib.request

import botocore.exceptions
import pytest
from botocore.exceptions import ClientError

from emulator.core import tls
from tests.unit.emulator.support import checked_stack, endpoint_client, function_project

TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Bucket:
    Type: AWS::S3::Bucket
  BucketPolicy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref Bucket
      PolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Sid: DenyInsecureTransport
            Effect: Deny
            Principal: "*"
            Action: s3:*
            Resource: [!GetAtt Bucket.Arn, !Sub "${Bucket.Arn}/*"]
            Condition: {Bool: {aws:SecureTransport: "false"}}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.13
      Handler: app.lambda_handler
      CodeUri: fn/
      Timeout: 30
      Environment:
        Variables:
          BUCKET: !Ref Bucket
      Policies:
        - S3CrudPolicy:
            BucketName: !Ref Bucket
"""

# Puts an object through each endpoint of the event (the stack's https one, or its plain side).
HANDLER = textwrap.dedent(
    """
    import os
    import boto3

    def lambda_handler(event, context):
        results = []
        for endpoint in event["endpoints"]:
            s3 = boto3.client("s3", endpoint_url=endpoint)
            try:
                s3.put_object(Bucket=os.environ["BUCKET"], Key="from-fn", Body=b"x")
                results.append("ok")
            except Exception as error:
                results.append(error.response["Error"]["Code"])
        return results
    """
)


class Local:
    def __init__(self, server, runtime, bucket, authority):
        self.server, self.runtime, self.bucket, self.authority = server, runtime, bucket, authority
        port = server.get_host_and_port()[1]
        self.https, self.plain = f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port}"

    def s3(self, endpoint: str, verify=None):
        return endpoint_client("s3", endpoint, verify=verify or str(self.authority))


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    project = tmp_path_factory.mktemp("project")
    template = function_project(project, TEMPLATE, HANDLER, "tls")
    certificates = tls.issue(project / "tls", {"localhost", "127.0.0.1"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_CA_BUNDLE", str(certificates.authority))  # the deployer's clients
        with checked_stack(template, project / "logs", certificates) as (server, runtime, found):
            bucket = found.functions[0].environment["BUCKET"]
            yield Local(server, runtime, bucket, certificates.authority)


def test_https_is_served_with_a_certificate_only_the_stacks_authority_vouches_for(local):
    assert local.server.endpoint_url == local.https
    assert local.s3(local.https).list_buckets()["Buckets"]
    with pytest.raises(botocore.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        local.s3(local.https, verify=True).list_buckets()  # the public authorities' bundle


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_pythons_strict_verification_accepts_it_by_each_local_name(local, host):
    context = ssl.create_default_context(cafile=local.authority)  # VERIFY_X509_STRICT
    url = local.https.replace("127.0.0.1", host) + "/_emulator/status"
    with urllib.request.urlopen(url, context=context, timeout=10) as answer:
        assert answer.status == 200


def test_a_call_over_plain_http_is_denied_by_deny_insecure_transport_and_changes_nothing(local):
    local.s3(local.https).put_object(Bucket=local.bucket, Key="over-tls", Body=b"x")
    with pytest.raises(ClientError) as denied:
        local.s3(local.plain).put_object(Bucket=local.bucket, Key="over-http", Body=b"x")
    # moto answers a bucket policy's deny with a bare 403 (docs/local-stack.md); a function's
    # call, decided before moto, gets S3's AccessDenied (below)
    assert denied.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError):  # reads are denied too
        local.s3(local.plain).get_object(Bucket=local.bucket, Key="over-tls")
    listed = local.s3(local.https).list_objects_v2(Bucket=local.bucket)["Contents"]
    assert "over-http" not in {o["Key"] for o in listed}


def test_a_function_over_http_is_denied_by_the_bucket_and_over_https_allowed(local):
    result = local.runtime.invoke("Fn", {"endpoints": [local.https, local.plain]})
    assert result.ok, result.error
    assert result.payload == ["ok", "AccessDenied"]
    calls = local.server.access.snapshot()["functions"]["Fn"]["calls"]
    puts = [c for c in calls if c["action"] == "s3:PutObject"]
    assert {(c["allowed"], c.get("denied_by")) for c in puts} == {
        (True, None),
        (False, f"policy of arn:aws:s3:::{local.bucket}/DenyInsecureTransport"),
    }
