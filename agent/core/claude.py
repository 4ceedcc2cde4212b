"""Claude behind the model seam: one Messages request over httpx2 (no SDK: its import was most of the start-up) to
Bedrock's InvokeModel or the direct API, signed by a Bedrock API key, SigV4 or the Anthropic key. Retries are
:mod:`mcp_lib.retry`'s, then :class:`ModelUnavailable`; other failures :class:`ModelRequestError` or ``ConfigError``."""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx2

from agent.core.claude_stream import read_stream
from agent.core.model import ModelResponse, Request, Usage
from agent.core.model_config import BEDROCK_ANTHROPIC_VERSION, ModelConfig, Provider
from agent.errors import ModelRequestError, ModelUnavailable, StatusError, Truncated
from mcp_lib import doors
from mcp_lib.clock import SYSTEM_CLOCK, Clock
from mcp_lib.config import ConfigError
from mcp_lib.errors import GaveUp
from mcp_lib.payload import count
from mcp_lib.retry import Budget, Policy, call, server_wait

if TYPE_CHECKING:
    from mcp_lib.http import NameResolution

ANTHROPIC_VERSION = "2023-06-01"  # the direct API's anthropic-version header (docs.anthropic.com/en/api/versioning)
RETRYABLE_STATUS = frozenset({408, 424, 429, 500, 502, 503, 504, 529})  # 424: Bedrock's ModelStreamErrorException
MIN_ATTEMPT_S = 1.0  # an attempt with less time than this before the deadline is not started
DEFAULT_POLICY = Policy(attempts=6, base_s=2.0, max_backoff_s=30.0, max_server_wait_s=300.0)
# An endpoint that refuses connections, does not resolve or fails TLS will not get better in a minute: one quick
# retry, then the run degrades (a degraded answer within seconds instead of a minute of retries).
UNREACHABLE_POLICY = Policy(attempts=2, base_s=1.0, max_backoff_s=1.0)
MAX_REPORTED_TOKENS = 10**9  # a usage count above this is taken as this
CONNECT_TIMEOUT_S = 5.0  # a connection not made in this time counts as unreachable
Sign = Callable[[str, bytes], Mapping[str, str]]  # (url, body) -> the headers that carry the credential


def _botocore(exc: BaseException) -> Any:
    """botocore's exceptions module when ``exc`` is one of them (botocore is imported only to sign)."""
    return importlib.import_module("botocore.exceptions") if type(exc).__module__.startswith("botocore") else None


def _is_unreachable(exc: BaseException) -> bool:
    """Refused, DNS, TLS or a connect timeout -- or botocore failing to reach STS for OIDC credentials."""
    boto = _botocore(exc)
    if boto is not None:
        return isinstance(exc, boto.ConnectionError | boto.HTTPClientError)
    return isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout)


def failure_text(exc: BaseException) -> str:
    """One line: HTTP status, the error type and the service's message, or the exception itself."""
    return str(exc) if isinstance(exc, StatusError) else f"{type(exc).__name__}: {exc}".strip()


def _status_error(response: httpx2.Response) -> StatusError:
    """Bedrock names the error in ``x-amzn-ErrorType`` with ``{"message"}``; the API in ``{"error": {...}}``."""
    body = None
    with contextlib.suppress(ValueError):
        body = response.json()
    body = body if isinstance(body, dict) else {}
    error: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else {}
    kind = response.headers.get("x-amzn-errortype", "").split(":")[0] or error.get("type") or response.reason_phrase
    message = body.get("message") or error.get("message") or response.text[:200]
    return StatusError(response.status_code, str(kind), str(message), response.headers)


class Claude:
    """The Messages API of one provider behind :class:`Model`, retrying on the request's clock (else this one)."""

    def __init__(self, http: httpx2.Client, provider: Provider, base_url: str, sign: Sign, *,
                 policy: Policy = DEFAULT_POLICY, request_timeout_s: float = 120.0, clock: Clock = SYSTEM_CLOCK):
        self.http, self.provider, self.base_url, self.sign = http, provider, base_url.rstrip("/"), sign
        self.policy, self.request_timeout_s, self.clock = policy, request_timeout_s, clock

    def create(self, request: Request) -> ModelResponse:
        given = {key: value for key in ("system", "tools", "tool_choice") if (value := getattr(request, key))}
        body: dict[str, Any] = {"max_tokens": request.max_tokens, "messages": request.messages, **given}
        retries: list[str] = []  # one line per failed attempt that was retried, for the trace
        streamed = False  # text reached ``on_text``: a retried attempt must not send it again

        def emit(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert request.on_text is not None
            request.on_text(delta)

        clock = request.clock or self.clock

        def attempt(left: float) -> ModelResponse:
            on_text = emit if request.on_text is not None and not streamed else None
            return _to_response(self._send(request.model, body, left, on_text), retries)

        def on_retry(attempt: int, failure: BaseException, wait: float) -> None:
            retries.append(f"attempt {attempt} failed ({failure_text(failure)}); retrying in {wait:.1f} s")

        try:
            return call(attempt, retry=self._retryable, on_retry=on_retry,
                        policy=lambda exc: UNREACHABLE_POLICY if _is_unreachable(exc) else self.policy,
                        asked=lambda exc: server_wait(exc.headers, clock) if isinstance(exc, StatusError) else None,
                        budget=Budget(request.deadline, clock, MIN_ATTEMPT_S))
        except GaveUp as exc:
            raise self._gave_up(exc, request.model, retries) from None
        except Exception as exc:
            raise self._rejected(exc, request.model) from None

    def _send(self, model: str, body: dict[str, Any], left: float,
              on_text: Callable[[str], None] | None) -> dict[str, Any]:
        """One attempt, never outliving the deadline, nor waiting long for a connection."""
        bedrock = self.provider == "bedrock"
        if bedrock:  # InvokeModel's URI: POST /model/{modelId}/invoke (the SDKs keep ":" of a model id as it is)
            path = f"/model/{quote(model, safe=':')}/invoke{'-with-response-stream' if on_text else ''}"
            payload = {**body, "anthropic_version": BEDROCK_ANTHROPIC_VERSION}
        else:
            path, payload = "/v1/messages", {"model": model, **body, **({"stream": True} if on_text else {})}
        url = self.base_url + path
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        headers = {"content-type": "application/json", **self.sign(url, data)}
        total = min(self.request_timeout_s, left)
        timeout = httpx2.Timeout(total, connect=min(CONNECT_TIMEOUT_S, total))
        with self.http.stream("POST", url, content=data, headers=headers, timeout=timeout) as response:
            if response.status_code == 200 and on_text is not None:
                return read_stream(response, bedrock, on_text)
            response.read()
            if response.status_code != 200:
                raise _status_error(response)
            return response.json()

    def _retryable(self, exc: BaseException) -> bool:
        return (_is_unreachable(exc)  # and timeouts, resets, cuts, a compressed body mangled on the way
                or isinstance(exc, httpx2.TransportError | httpx2.DecodingError | Truncated)
                or (isinstance(exc, StatusError) and (exc.status in RETRYABLE_STATUS or exc.status >= 500)))

    def _gave_up(self, exc: GaveUp, model: str, retries: list[str]) -> ModelUnavailable:
        """Out of retries: ``out_of_time`` when the deadline, not the number of attempts, ended them."""
        if exc.last is None:
            last = f"; last error: {retries[-1]}" if retries else ""
            return ModelUnavailable(f"{self.provider} model {model}: no time left before the deadline for "
                                    f"{'another' if retries else 'a first'} attempt{last}", out_of_time=True)
        return ModelUnavailable(f"{self.provider} model {model} unavailable after {exc.attempts} attempt(s): "
                                f"{failure_text(exc.last)}", out_of_time=exc.why != "attempts")

    def _rejected(self, exc: Exception, model: str) -> Exception:
        """A failure retrying cannot help: bad local configuration, or a request the service rejected."""
        boto = _botocore(exc)
        if isinstance(exc, ConfigError):
            return exc
        if boto is not None and isinstance(exc, boto.ProfileNotFound):
            return ConfigError("AWS_PROFILE", f"{exc} (check AWS_PROFILE and AWS_CONFIG_FILE)")
        if boto is not None and isinstance(exc, boto.BotoCoreError):
            return ConfigError("AWS credentials", f"{type(exc).__name__}: {exc}")
        if boto is not None and isinstance(exc, boto.ClientError):  # AWS refused the credentials, not Bedrock
            error, operation = exc.response.get("Error") or {}, exc.operation_name
            if operation == "AssumeRoleWithWebIdentity":  # STS, for OIDC
                return ConfigError("AWS_ROLE_ARN", f"AWS STS refused the credentials ({error.get('Code')}: "
                                                   f"{error.get('Message')}); check the role's trust policy for "
                                                   "this repository and the OIDC token")
            return ConfigError("AWS credentials", f"AWS refused the credentials ({operation}: {error.get('Code')}: "
                                                  f"{error.get('Message')})")
        status = exc.status if isinstance(exc, StatusError) else None
        hint = {401: " (check the API key / AWS credentials)",
                403: " (check the credentials' permissions and the model access for this region)",
                404: " (check HELPBOT_MODEL and the region)"}.get(status or 0, "")
        if status == 400 and "inference profile" in str(exc):  # on-demand invocation of a bare model id
            hint = " (use an inference profile id in HELPBOT_MODEL / HELPBOT_SUMMARY_MODEL, e.g. jp.anthropic.…)"
        return ModelRequestError(f"{self.provider} rejected the request to {model}: {failure_text(exc)}{hint}",
                                 status=status)


def _to_response(message: Any, retries: list[str]) -> ModelResponse:
    """The loop's response from a Messages API message (its blocks the model's: the loop vets them)."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise ValueError(f"not a Messages API message: {str(message)[:200]}")
    content: list[dict[str, Any]] = []
    for block in message["content"]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            content.append({"type": "text", "text": str(block.get("text") or "")})
        elif block.get("type") == "tool_use":  # the input unchecked (a string or a list too)
            content.append({"type": "tool_use", **{key: block.get(key) for key in ("id", "name", "input")}})
        else:  # thinking and server-tool blocks are passed back as they came -- when a request can carry them
            kept = {key: value for key, value in block.items() if value is not None}
            try:  # a NaN parses, but the run's next request would be refused
                json.dumps(kept, allow_nan=False)
            except ValueError:
                continue
            content.append(kept)
    u: dict[str, Any] = message["usage"] if isinstance(message.get("usage"), dict) else {}
    # counts the service reports (garbage: 0), within what a request can count (a 400-digit one overflows a float)
    usage = Usage(**{key: min(count(u.get(key)), MAX_REPORTED_TOKENS) for key in Usage().to_dict()})
    stop = message.get("stop_reason")
    return ModelResponse(content=content, stop_reason=stop if isinstance(stop, str) else None, usage=usage,
                         retries=retries)


def _sigv4(config: ModelConfig) -> Sign:
    """SigV4 for the service ``bedrock`` (botocore's signer): the keys given, else what botocore resolves for the
    profile or the web identity (OIDC) on the first request, refreshed by botocore as they expire."""
    resolved: list[Any] = []

    def sign(url: str, data: bytes) -> Mapping[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        if not resolved and config.aws_access_key:
            resolved.append(Credentials(config.aws_access_key, config.aws_secret_key, config.aws_session_token))
        elif not resolved:
            from botocore.session import Session

            found = Session(profile=config.aws_profile).get_credentials()
            if found is None:
                raise ConfigError("AWS credentials", "Could not resolve AWS credentials; set AWS_BEARER_TOKEN_BEDROCK, "
                                                     "AWS keys, AWS_PROFILE or OIDC (AWS_WEB_IDENTITY_TOKEN_FILE + "
                                                     "AWS_ROLE_ARN)")
            resolved.append(found)
        signed = AWSRequest("POST", url, data=data, headers={"content-type": "application/json"})
        SigV4Auth(resolved[0].get_frozen_credentials(), "bedrock", config.region).add_auth(signed)
        return dict(signed.headers.items())

    return sign


def build_model(config: ModelConfig, *, clock: Clock = SYSTEM_CLOCK, http_client: httpx2.Client | None = None,
                names: NameResolution | None = None) -> Claude:
    """The configured provider's client. Its own HTTP client (none handed in) sends the credential to the configured
    origin only (:mod:`mcp_lib.doors`), follows no redirect, resolves the host in the connect timeout (``names``)."""
    sign: Sign
    if config.provider == "anthropic":
        base_url = config.base_url or doors.ANTHROPIC_URL
        door = doors.door("ANTHROPIC_API_KEY", base_url, config.anthropic_api_key)
        key = config.anthropic_api_key or ""
        sign = lambda url, data: {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}  # noqa: E731
    else:
        base_url = config.base_url or doors.BEDROCK_URL.format(region=config.region or "")
        door = doors.door("AWS_BEARER_TOKEN_BEDROCK/AWS_ACCESS_KEY_ID", base_url, config.bearer_token,
                          config.aws_access_key, config.aws_session_token)
        bearer = f"Bearer {config.bearer_token}"  # a Bedrock API key
        sign = (lambda url, data: {"authorization": bearer}) if config.bearer_token else _sigv4(config)
    if http_client is None:
        from mcp_lib.http import NameResolution

        hooks = [door.hook(), (names or NameResolution.shared()).hook()]
        http_client = httpx2.Client(event_hooks={"request": hooks}, follow_redirects=False)
    return Claude(http_client, config.provider, base_url, sign, policy=replace(DEFAULT_POLICY,
                  attempts=config.max_attempts), request_timeout_s=config.request_timeout_s, clock=clock)
