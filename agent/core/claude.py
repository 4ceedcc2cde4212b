"""Claude through the anthropic SDK: the client behind the model seam (configured by :mod:`agent.core.model_config`).

Retries are ours (:mod:`mcp_lib.retry`), not the SDK's: the SDK is built with ``max_retries=0``, so the two never
multiply and every wait is on the run's clock. Throttling (429 / ThrottlingException), 5xx/529 and timeouts are
retried with backoff, honouring the server's wait, until the attempts or the deadline are spent (then
:class:`ModelUnavailable`); an unreachable endpoint (refused, DNS, TLS) gets one quick retry. No attempt starts,
and no request outlives, the deadline. Client errors (400/401/403/404...) are not retried:
:class:`ModelRequestError` says what was rejected. Local AWS credentials that botocore cannot find or read (an
unknown ``AWS_PROFILE``, no credentials at all) are bad configuration: ``ConfigError`` (exit 2).

``anthropic`` is imported lazily: ``helpbot --help`` must not pay for it, and ``helpbot answer`` imports it on a
background thread (:func:`prefetch`) while it reads Slack, off the path to the first model request.
"""

from __future__ import annotations

import gc
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from agent.core.claude_stream import streamed_message
from agent.core.model import ModelResponse, Request, Usage
from agent.core.model_config import BEDROCK_ANTHROPIC_VERSION, ModelConfig
from agent.errors import ModelRequestError, ModelUnavailable
from mcp_lib.config import ConfigError
from mcp_lib.errors import GaveUp
from mcp_lib.retry import Budget, Paired, Policy, call, server_wait

if TYPE_CHECKING:
    from mcp_lib.http import NameResolution

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})
MIN_ATTEMPT_S = 1.0  # an attempt with less time than this before the deadline is not started

# -- what is retryable -----------------------------------------------------------------------------------------
# Throttling, 5xx/529 and timeouts: backoff from 2 s (or the server's retry-after), bounded by the deadline.
DEFAULT_POLICY = Policy(attempts=6, base_s=2.0, max_backoff_s=30.0, max_server_wait_s=300.0)
# An endpoint that refuses connections, does not resolve or fails TLS will not get better in a minute: one quick
# retry, then the run degrades (a degraded answer within seconds instead of a minute of retries).
UNREACHABLE_POLICY = Policy(attempts=2, base_s=1.0, max_backoff_s=1.0)
CONNECT_TIMEOUT_S = 5.0  # a connection not made in this time counts as unreachable


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _is_unreachable(exc: BaseException) -> bool:
    """Connection refused, DNS failure, TLS failure or a connect timeout: the request never reached the model."""
    import anthropic
    import httpx2

    if isinstance(exc, anthropic.APIConnectionError):  # the SDK raises it from the transport's error
        return isinstance(exc.__cause__, httpx2.ConnectError | httpx2.ConnectTimeout)
    return _is_boto_network_error(exc)  # e.g. STS unreachable while resolving OIDC credentials


def _is_retryable(exc: BaseException) -> bool:
    import anthropic

    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        return True
    status = _status(exc)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


def _asked(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return server_wait(headers) if headers is not None else None


def _is_boto_network_error(exc: BaseException) -> bool:
    try:
        from botocore import exceptions as boto
    except ImportError:
        return False
    return isinstance(exc, boto.ConnectionError | boto.HTTPClientError)


def _credentials_problem(exc: BaseException) -> ConfigError | None:
    """botocore failing to find or read the local AWS credentials or config: bad configuration, not a rejection
    by Bedrock (the SDK resolves credentials while preparing each request)."""
    try:
        from botocore import exceptions as boto
    except ImportError:
        return None
    if isinstance(exc, boto.ProfileNotFound):
        return ConfigError("AWS_PROFILE", f"{exc} (check AWS_PROFILE and AWS_CONFIG_FILE)")
    if isinstance(exc, boto.BotoCoreError) and not _is_boto_network_error(exc):
        return ConfigError("AWS credentials", f"{type(exc).__name__}: {exc}")
    if isinstance(exc, RuntimeError) and "AWS credentials" in str(exc):  # the SDK: "Could not resolve AWS ..."
        return ConfigError("AWS credentials", f"{exc}; set AWS_BEARER_TOKEN_BEDROCK, AWS keys, AWS_PROFILE or "
                                              "OIDC (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN)")
    return None


def failure_text(exc: BaseException) -> str:
    """One line: HTTP status, the Bedrock error type and the service's message, or the exception itself."""
    status = _status(exc)
    if status is None:
        cause = exc.__cause__ if _is_unreachable(exc) else None  # the SDK's text hides why: refused, DNS, TLS
        why = f" ({type(cause).__name__}: {cause})" if cause is not None and str(cause) not in str(exc) else ""
        return f"{type(exc).__name__}: {exc}{why}".strip()
    response = getattr(exc, "response", None)
    error_type = (response.headers.get("x-amzn-errortype", "") if response is not None else "").split(":")[0]
    body = getattr(exc, "body", None)
    message = None
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
    kind = error_type or type(exc).__name__
    return f"HTTP {status} {kind}: {message or exc}"


# -- the SDK-backed models -------------------------------------------------------------------------------------
class SdkModel:
    """A Messages API client (anything with ``.messages.create``) behind the :class:`Model` protocol; the
    retries are :mod:`mcp_lib.retry`'s, on the injected clock and sleep."""

    extra_body: ClassVar[dict[str, Any] | None] = None
    provider = "anthropic"

    def __init__(self, client: Any, *, policy: Policy = DEFAULT_POLICY, request_timeout_s: float = 120.0,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.policy = policy
        self.request_timeout_s = request_timeout_s
        self.sleep = sleep
        self.clock = clock

    def create(self, request: Request) -> ModelResponse:
        kwargs: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens,
                                  "messages": request.messages}
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = request.tools
        if request.tool_choice:
            kwargs["tool_choice"] = request.tool_choice
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        retries: list[str] = []  # one line per failed attempt that was retried, for the trace

        streamed = False  # text reached ``on_text``: a retried attempt must not send it again

        def emit(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert request.on_text is not None
            request.on_text(delta)

        def attempt(left: float) -> Any:
            if request.on_text is None or streamed:
                return self.client.messages.create(timeout=self._timeout(left), **kwargs)
            return streamed_message(self.client, emit, timeout=self._timeout(left), **kwargs)

        def on_retry(attempt: int, failure: BaseException, wait: float) -> None:
            retries.append(f"attempt {attempt} failed ({failure_text(failure)}); retrying in {wait:.1f} s")

        try:
            clock, sleep = (request.clock.monotonic, request.clock.sleep) if request.clock else (self.clock, self.sleep)
            message = call(attempt, retry=self._retryable, policy=self._policy, asked=_asked,
                           budget=Budget(request.deadline, Paired(sleep, clock), MIN_ATTEMPT_S), on_retry=on_retry)
        except GaveUp as exc:
            raise self._gave_up(exc, request.model, retries) from None
        except Exception as exc:
            raise self._rejected(exc, request.model) from None
        return _to_response(message, retries)

    def _timeout(self, left: float) -> Any:
        """A request never outlives the deadline, and a connection not made in a few seconds is not waited for."""
        import anthropic

        total = min(self.request_timeout_s, left)
        return anthropic.Timeout(total, connect=min(CONNECT_TIMEOUT_S, total))

    def _retryable(self, exc: BaseException) -> bool:
        return _is_unreachable(exc) or _is_retryable(exc)

    def _policy(self, exc: BaseException) -> Policy:
        return UNREACHABLE_POLICY if _is_unreachable(exc) else self.policy

    def _gave_up(self, exc: GaveUp, model: str, retries: list[str]) -> ModelUnavailable:
        """Out of retries: ``out_of_time`` when the deadline, not the number of attempts, ended them."""
        out_of_time = exc.why != "attempts"
        if exc.last is None:
            last = f"; last error: {retries[-1]}" if retries else ""
            return ModelUnavailable(f"{self.provider} model {model}: no time left before the deadline for "
                                    f"{'another' if retries else 'a first'} attempt{last}", out_of_time=True)
        return ModelUnavailable(f"{self.provider} model {model} unavailable after {exc.attempts} attempt(s): "
                                f"{failure_text(exc.last)}", out_of_time=out_of_time)

    def _rejected(self, exc: Exception, model: str) -> Exception:
        """A failure retrying cannot help: bad local configuration, or a request the service rejected."""
        config_error = _credentials_problem(exc)
        if config_error is not None:
            return config_error
        hint = {401: " (check the API key / AWS credentials)",
                403: " (check the credentials' permissions and the model access for this region)",
                404: " (check HELPBOT_MODEL and the region)"}.get(_status(exc) or 0, "")
        if _status(exc) == 400 and "inference profile" in str(exc):  # on-demand invocation of a bare model id
            hint = " (use an inference profile id in HELPBOT_MODEL / HELPBOT_SUMMARY_MODEL, e.g. jp.anthropic.…)"
        return ModelRequestError(f"{self.provider} rejected the request to {model}: {failure_text(exc)}{hint}",
                                 status=_status(exc))


class BedrockModel(SdkModel):
    """Claude on Amazon Bedrock (InvokeModel). The body must carry Bedrock's ``anthropic_version``: anthropic
    2.x fills in its own API version with ``setdefault``, which Claude 4.5 on Bedrock may refuse with a 400."""

    extra_body: ClassVar[dict[str, Any] | None] = {"anthropic_version": BEDROCK_ANTHROPIC_VERSION}
    provider = "bedrock"


class AnthropicModel(SdkModel):
    """Claude through the direct Anthropic API (ANTHROPIC_API_KEY)."""

    provider = "anthropic"


def _to_response(message: Any, retries: list[str]) -> ModelResponse:
    content: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            content.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            raw = block.input  # the model's, unchecked (a string or a list too): the loop vets it
            content.append({"type": "tool_use", "id": block.id, "name": block.name,
                            "input": dict(raw) if isinstance(raw, dict) else raw})
        else:  # thinking and server-tool blocks are passed back as they came
            content.append(block.model_dump(exclude_none=True))
    u = message.usage
    usage = Usage(u.input_tokens or 0, u.output_tokens or 0, u.cache_read_input_tokens or 0,
                  u.cache_creation_input_tokens or 0)
    return ModelResponse(content=content, stop_reason=message.stop_reason, usage=usage, retries=retries)


def prefetch() -> threading.Thread:
    """Import the SDK (the Bedrock client included) on a daemon thread; :func:`build_model` later finds it loaded.

    ``import anthropic`` is most of the time to the first model request on a fresh runner (about 3,000 modules,
    mostly ``anthropic.types``; the SDK's own modules import that package whole, so no part of it can be imported
    alone); the front starts this before its Slack round trips, which wait on the network and leave the
    interpreter free. An import holds the GIL while it runs, so it is no faster on a thread: what the thread buys
    is the waits it fills.
    """

    def load() -> None:
        collecting = gc.isenabled()
        gc.disable()  # the import creates ~1M objects and no garbage: collections during it cost ~7 % of its CPU
        try:
            for name in ("anthropic", "anthropic.lib.bedrock"):
                importlib.import_module(name)
        except Exception:  # build_model imports it again and reports the failure where it matters
            return
        finally:
            if collecting:
                gc.enable()

    thread = threading.Thread(target=load, name="prefetch-anthropic", daemon=True)
    thread.start()
    return thread


def build_model(
    config: ModelConfig,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    http_client: Any = None,
    names: NameResolution | None = None,
) -> SdkModel:
    """The SDK client for the configured provider, with the SDK's own retries off (ours apply). Its own HTTP
    client (none handed in) resolves the endpoint's name within the connect timeout (``names``, the test seam)."""
    import anthropic

    policy = replace(DEFAULT_POLICY, attempts=config.max_attempts)
    options: dict[str, Any] = {"policy": policy, "request_timeout_s": config.request_timeout_s, "sleep": sleep,
                               "clock": clock}
    # The credentials go to the configured endpoint's origin only (mcp_lib.doors), given to the SDK explicitly.
    from mcp_lib import doors

    if config.provider == "anthropic":
        base_url = config.base_url or doors.ANTHROPIC_URL
        door = doors.door("ANTHROPIC_API_KEY", base_url, config.anthropic_api_key)
    else:
        base_url = config.base_url or doors.bedrock_url(config.region or "")
        door = doors.door("AWS_BEARER_TOKEN_BEDROCK/AWS_ACCESS_KEY_ID", base_url, config.bearer_token,
                          config.aws_access_key, config.aws_session_token)
    if http_client is None:  # the SDK's defaults (proxies, keep-alive) but no redirects, and getaddrinfo bounded
        from mcp_lib.http import NameResolution

        hook = (names or NameResolution.shared()).hook()
        http_client = anthropic.DefaultHttpxClient(event_hooks={"request": [door.hook(), hook]},
                                                   follow_redirects=False)
    common: dict[str, Any] = {"max_retries": 0, "timeout": config.request_timeout_s, "http_client": http_client,
                              "base_url": base_url}
    if config.provider == "anthropic":
        direct = anthropic.Anthropic(api_key=config.anthropic_api_key, **common)
        return AnthropicModel(direct, **options)
    auth: dict[str, Any]
    if config.bearer_token:
        auth = {"api_key": config.bearer_token}
    elif config.aws_access_key:
        auth = {"aws_access_key": config.aws_access_key, "aws_secret_key": config.aws_secret_key,
                "aws_session_token": config.aws_session_token}
    else:  # a profile, or web identity (OIDC) resolved by botocore
        auth = {"aws_profile": config.aws_profile}
    if config.bearer_token_blank:
        # Empty means unset (Actions passes an unset secret as ""), but the SDK reads the variable itself and takes
        # "" for an API key: it would refuse it next to AWS credentials, or send an empty Bearer instead of SigV4.
        # So the client is built without credentials and given ours (its public attributes) afterwards.
        client = anthropic.AnthropicBedrock(aws_region=config.region, **common)
        client.api_key = None
        for name, value in auth.items():
            setattr(client, name, value)
        return BedrockModel(client, **options)
    try:
        client = anthropic.AnthropicBedrock(aws_region=config.region, **auth, **common)
    except ValueError as exc:  # e.g. AWS_BEARER_TOKEN_BEDROCK in the process env next to explicit keys
        raise ConfigError("AWS_BEARER_TOKEN_BEDROCK", str(exc)) from None
    return BedrockModel(client, **options)
