"""The services' own errors (emulator/core/calls.py) as botocore reads them: the code a client
sees, and for a throttle, whether botocore counts it as throttling."""

import botocore.session
from botocore.parsers import create_parser
from botocore.retries.standard import ThrottledRetryableChecker
from urllib3 import HTTPHeaderDict

from emulator.core import calls

SESV2_SEND = {"REQUEST_METHOD": "POST", "PATH_INFO": "/v2/email/outbound-emails"}


def read_by_botocore(service: str, operation: str, response: calls.Response) -> dict:
    status, headers, body = response
    model = botocore.session.get_session().get_service_model(service)
    parser = create_parser(model.metadata["protocol"])
    raw = {"status_code": int(status.split()[0]), "headers": HTTPHeaderDict(headers), "body": body}
    return parser.parse(raw, model.operation_model(operation).output_shape)


def test_a_throttled_ses_v2_send_is_sesv2s_throttling_error_as_botocore_reads_it():
    response = calls.throttle_response(SESV2_SEND, "ses")
    assert response[0].startswith("429")
    error = read_by_botocore("sesv2", "SendEmail", response)["Error"]
    assert error["Code"] == "TooManyRequestsException"
    assert error["Code"] in ThrottledRetryableChecker._THROTTLED_ERROR_CODES


def test_an_ses_v2_send_iam_refuses_is_access_denied_as_botocore_reads_it():
    response = calls.access_denied_response(SESV2_SEND, "ses", "not allowed")
    assert response[0].startswith("403")
    error = read_by_botocore("sesv2", "SendEmail", response)["Error"]
    assert (error["Code"], error["Message"]) == ("AccessDeniedException", "not allowed")
