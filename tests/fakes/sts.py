"""A local AWS STS stand-in for OIDC: ``Action=AssumeRoleWithWebIdentity``, as botocore's web identity provider
(``AWS_ROLE_ARN`` + ``AWS_WEB_IDENTITY_TOKEN_FILE``) calls it; point botocore at it with ``AWS_ENDPOINT_URL_STS``.

The query protocol as documented (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity
.html; the errors: https://docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html): a form-encoded POST with
``Action`` and ``Version=2011-06-15``; the answer is ``AssumeRoleWithWebIdentityResponse`` /
``AssumeRoleWithWebIdentityResult`` / ``Credentials`` (AccessKeyId, SecretAccessKey, SessionToken, Expiration)
beside AssumedRoleUser, Provider, Audience and SubjectFromWebIdentityToken, and ``ResponseMetadata/RequestId``.
Refused as STS refuses, in its ``ErrorResponse`` XML: a missing RoleArn, RoleSessionName or WebIdentityToken or
one outside the documented lengths and pattern (400 ValidationError, "1 validation error detected: Value null at
'roleArn' failed to satisfy constraint: Member must not be null"), another action or version (400 InvalidAction),
a token ``accepts`` refuses for the role (403 AccessDenied, as a trust policy that does not match answers).

Each call issues new keys, recorded in ``sts.calls``; ``secrets`` (a BedrockStub's ``aws_secrets``, handed in)
learns each issued key's secret, so the stub checks the SigV4 signatures made with them. ``delay_s`` holds every
answer that long (a bench's round trip to STS; tests leave it 0).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

VERSION = "2011-06-15"
XMLNS = f"https://sts.amazonaws.com/doc/{VERSION}/"
SESSION_NAME = re.compile(r"[\w+=,.@-]*")
# The request's members as the API reference gives them: (name, its lower-camel name in messages, min, max length).
MEMBERS = (("RoleArn", "roleArn", 20, 2048), ("RoleSessionName", "roleSessionName", 2, 64),
           ("WebIdentityToken", "webIdentityToken", 4, 20000))


@dataclass
class Issued:
    """One AssumeRoleWithWebIdentity call that got credentials."""

    role_arn: str
    session_name: str
    token: str
    access_key: str
    secret_key: str
    session_token: str
    expiration: str


def validation_errors(params: dict[str, str]) -> list[str]:
    """STS's ValidationError items for the required members: absent, too short or long, a session name off its
    pattern."""
    found = []
    for name, camel, shortest, longest in MEMBERS:
        value = params.get(name)
        if value is None:
            found.append(f"Value null at '{camel}' failed to satisfy constraint: Member must not be null")
        elif not shortest <= len(value) <= longest:
            bound = (f"greater than or equal to {shortest}" if len(value) < shortest
                     else f"less than or equal to {longest}")
            shown = "" if name == "WebIdentityToken" else f" '{value}'"  # a token is not echoed
            found.append(f"Value{shown} at '{camel}' failed to satisfy constraint: Member must have length {bound}")
        elif name == "RoleSessionName" and not SESSION_NAME.fullmatch(value):
            found.append(f"Value '{value}' at '{camel}' failed to satisfy constraint: Member must satisfy regular "
                         r"expression pattern: [\w+=,.@-]*")
    return found


def error_xml(code: str, message: str, request_id: str) -> bytes:
    return (f'<ErrorResponse xmlns="{XMLNS}">\n  <Error>\n    <Type>Sender</Type>\n    <Code>{code}</Code>\n'
            f"    <Message>{escape(message)}</Message>\n  </Error>\n  <RequestId>{request_id}</RequestId>\n"
            "</ErrorResponse>\n").encode()


def result_xml(issued: Issued, request_id: str) -> bytes:
    role = issued.role_arn.rsplit("/", 1)[-1]
    account = issued.role_arn.split(":")[4] if issued.role_arn.count(":") >= 5 else "123456789012"
    return f"""<AssumeRoleWithWebIdentityResponse xmlns="{XMLNS}">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>repo:example/helpbot:ref:refs/heads/main</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::{account}:assumed-role/{escape(role)}/{escape(issued.session_name)}</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:{escape(issued.session_name)}</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>{issued.session_token}</SessionToken>
      <SecretAccessKey>{issued.secret_key}</SecretAccessKey>
      <Expiration>{issued.expiration}</Expiration>
      <AccessKeyId>{issued.access_key}</AccessKeyId>
    </Credentials>
    <Provider>arn:aws:iam::{account}:oidc-provider/token.actions.githubusercontent.com</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>{request_id}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>
""".encode()


class StsStub:
    def __init__(self, secrets: dict[str, str] | None = None, *, duration_s: int = 3600) -> None:
        self.secrets = secrets if secrets is not None else {}  # access key -> secret of every key issued
        self.duration_s = duration_s  # DurationSeconds' default: one hour
        self.delay_s = 0.0
        self.calls: list[Issued] = []
        self.refused: list[tuple[int, str]] = []  # (status, code) of every refusal
        self.accepts: Callable[[str, str], bool] = lambda role_arn, token: True  # the role's trust policy
        ids = itertools.count(1)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                n = next(ids)
                request_id = f"c0ffee00-0000-4000-8000-{n:012d}"
                if stub.delay_s:
                    time.sleep(stub.delay_s)  # the bench's round trip, never a test's
                if not (self.headers.get("content-type") or "").startswith("application/x-www-form-urlencoded"):
                    return self._refuse(400, "InvalidParameterValue", "the body must be form-encoded", request_id)
                params = {key: values[0] for key, values in parse_qs(raw, keep_blank_values=True).items()}
                action, version = params.get("Action"), params.get("Version")
                if action != "AssumeRoleWithWebIdentity" or version != VERSION:
                    return self._refuse(400, "InvalidAction", f"Could not find operation {action} for version "
                                                              f"{version}", request_id)
                errors = validation_errors(params)
                if errors:
                    count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected: "
                    return self._refuse(400, "ValidationError", count + "; ".join(errors), request_id)
                if not stub.accepts(params["RoleArn"], params["WebIdentityToken"]):
                    return self._refuse(403, "AccessDenied", "Not authorized to perform "
                                                             "sts:AssumeRoleWithWebIdentity", request_id)
                expires = datetime.now(UTC) + timedelta(seconds=int(params.get("DurationSeconds") or
                                                                    stub.duration_s))
                issued = Issued(params["RoleArn"], params["RoleSessionName"], params["WebIdentityToken"],
                                f"ASIAFAKESTS{n:09d}", f"sts-secret-{n}", f"sts-session-token-{n}",
                                expires.strftime("%Y-%m-%dT%H:%M:%SZ"))
                stub.secrets[issued.access_key] = issued.secret_key
                stub.calls.append(issued)
                self._send(200, result_xml(issued, request_id))

            def _refuse(self, status: int, code: str, message: str, request_id: str) -> None:
                stub.refused.append((status, code))
                self._send(status, error_xml(code, message, request_id))

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "text/xml")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> StsStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
