"""Claude through the anthropic SDK: configuration from the environment, and the SDK client behind the model seam.

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
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from agent.core.model import ModelRequestError, ModelResponse, ModelUnavailable, Request, Usage
from mcp_lib.config import ConfigError, env_float, env_int, env_str, env_url
from mcp_lib.retry import Budget, GaveUp, Policy, Retry, call, server_wait

if TYPE_CHECKING:
    from mcp_lib.http import NameResolution

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
DEFAULT_REGION = "ap-northeast-1"
Provider = Literal["bedrock", "anthropic"]
DEFAULT_MODELS = {
    "bedrock": ("jp.anthropic.claude-sonnet-4-5-20250929-v1:0", "jp.anthropic.claude-haiku-4-5-20251001-v1:0"),
    "anthropic": ("claude-sonnet-4-6", "claude-haiku-4-5-20251001"),  # 4.5 is deprecated on the direct API
}
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 529})
MIN_ATTEMPT_S = 1.0  # an attempt with less time than this before the deadline is not started

# Bedrock ids: optional cross-region prefix, provider, model, optional version; or an inference-profile ARN.
_BEDROCK_ID = re.compile(r"^(?:(global|us|eu|apac|jp|au|ca|us-gov)\.)?anthropic\.claude-[a-z0-9.-]+(?::\d+)?$")
_BEDROCK_ARN = re.compile(r"^arn:aws[a-z-]*:bedrock:[a-z0-9-]+:\d{12}:"
                          r"(?:inference-profile|application-inference-profile|foundation-model)/\S+$")
_ANTHROPIC_ID = re.compile(r"^claude-[a-z0-9.-]+$")
_REGION = re.compile(r"^[a-z]{2}(?:-gov)?-[a-z]+-\d$")
# A cross-region profile is only callable from regions of its geography.
# A value ending in "-" is a prefix; otherwise a whole region name (jp. routes only to Tokyo and Osaka).
_PROFILE_REGIONS = {"jp": ("ap-northeast-1", "ap-northeast-3"), "apac": ("ap-",), "au": ("ap-southeast-",),
                    "us": ("us-",), "us-gov": ("us-gov-",), "eu": ("eu-",), "ca": ("ca-",)}


# -- configuration ---------------------------------------------------------------------------------------------
# What turns the model on, for the lines that say it is off (degraded `ask`, `doctor`).
TURN_ON = "set AWS_BEARER_TOKEN_BEDROCK, or AWS_ROLE_ARN (OIDC) or AWS keys, or ANTHROPIC_API_KEY"
@dataclass(frozen=True)
class ModelConfig:
    """Which provider, which models, and how to reach and authenticate to them (all from the environment)."""

    provider: Provider
    model: str
    summary_model: str
    region: str | None = None
    base_url: str | None = None
    bearer_token: str | None = None  # AWS_BEARER_TOKEN_BEDROCK
    aws_access_key: str | None = None
    aws_secret_key: str | None = None
    aws_session_token: str | None = None
    aws_profile: str | None = None
    anthropic_api_key: str | None = None
    request_timeout_s: float = 120.0
    max_attempts: int = 6

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelConfig | None:
        """The configured provider; None when no credentials are set at all (helpbot then degrades)."""
        bearer = env_str(env, "AWS_BEARER_TOKEN_BEDROCK")
        access_key = env_str(env, "AWS_ACCESS_KEY_ID")
        secret_key = env_str(env, "AWS_SECRET_ACCESS_KEY")
        profile = env_str(env, "AWS_PROFILE")
        web_identity = env_str(env, "AWS_WEB_IDENTITY_TOKEN_FILE")
        api_key = env_str(env, "ANTHROPIC_API_KEY")
        aws_keys = access_key or secret_key or profile
        if web_identity and not env_str(env, "AWS_ROLE_ARN"):
            raise ConfigError("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not; OIDC "
                                              "web identity needs the role to assume")
        if web_identity and not os.path.isfile(web_identity):
            raise ConfigError("AWS_WEB_IDENTITY_TOKEN_FILE", f"{web_identity!r} is not a file (the OIDC token)")
        if bearer and aws_keys:
            other = "AWS_ACCESS_KEY_ID" if access_key else "AWS_SECRET_ACCESS_KEY" if secret_key else "AWS_PROFILE"
            raise ConfigError("AWS_BEARER_TOKEN_BEDROCK",
                              f"set together with {other}; use either a Bedrock API key or AWS credentials")
        has_bedrock = bool(bearer or aws_keys or web_identity)
        provider = env_str(env, "HELPBOT_PROVIDER")
        if provider is not None and provider not in DEFAULT_MODELS:
            raise ConfigError("HELPBOT_PROVIDER", f"{provider!r} is not one of: bedrock, anthropic")
        if provider is None:
            if has_bedrock and api_key:
                raise ConfigError("HELPBOT_PROVIDER", "both ANTHROPIC_API_KEY and AWS credentials are set; "
                                                      "choose one with HELPBOT_PROVIDER=bedrock or anthropic")
            provider = "bedrock" if has_bedrock else "anthropic" if api_key else None
        elif provider == "bedrock" and not has_bedrock:
            raise ConfigError("AWS_BEARER_TOKEN_BEDROCK", "HELPBOT_PROVIDER=bedrock but no Bedrock API key or "
                                                          "AWS credentials are set")
        elif provider == "anthropic" and not api_key:
            raise ConfigError("ANTHROPIC_API_KEY", "HELPBOT_PROVIDER=anthropic but ANTHROPIC_API_KEY is not set")

        model, summary_model = _model_ids(env, provider)
        timeout = env_float(env, "HELPBOT_MODEL_TIMEOUT_S", 120.0, minimum=1.0)
        attempts = env_int(env, "HELPBOT_MODEL_MAX_ATTEMPTS", 6, minimum=1)
        if provider is None:
            return None
        if provider == "anthropic":
            return cls("anthropic", model, summary_model, base_url=env_url(env, "ANTHROPIC_BASE_URL"),
                       anthropic_api_key=api_key, request_timeout_s=timeout, max_attempts=attempts)

        region = _region(env, (model, summary_model))
        if access_key and not secret_key:
            raise ConfigError("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID is set but its secret key is not")
        if secret_key and not access_key:
            raise ConfigError("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not")
        return cls("bedrock", model, summary_model, region=region,
                   base_url=env_url(env, "ANTHROPIC_BEDROCK_BASE_URL"), bearer_token=bearer,
                   aws_access_key=access_key, aws_secret_key=secret_key,
                   aws_session_token=env_str(env, "AWS_SESSION_TOKEN") if access_key else None,
                   aws_profile=profile, request_timeout_s=timeout, max_attempts=attempts)


def _model_ids(env: Mapping[str, str], provider: str | None) -> tuple[str, str]:
    defaults = DEFAULT_MODELS[provider or "bedrock"]
    ids = []
    for variable, default in zip(("HELPBOT_MODEL", "HELPBOT_SUMMARY_MODEL"), defaults, strict=True):
        value = env_str(env, variable) or default
        bedrock_ok = bool(_BEDROCK_ID.match(value) or _BEDROCK_ARN.match(value))
        anthropic_ok = bool(_ANTHROPIC_ID.match(value))
        if provider == "bedrock" and not bedrock_ok:
            raise ConfigError(variable, f"{value!r} is not a Bedrock model id; expected e.g. {defaults[0]}")
        if provider == "anthropic" and not anthropic_ok:
            raise ConfigError(variable, f"{value!r} is not an Anthropic API model id; expected e.g. "
                                        f"{DEFAULT_MODELS['anthropic'][0]}")
        if provider is None and not (bedrock_ok or anthropic_ok):
            raise ConfigError(variable, f"{value!r} is not a Claude model id; expected e.g. {defaults[0]}")
        ids.append(value)
    return ids[0], ids[1]


def _region(env: Mapping[str, str], model_ids: tuple[str, ...]) -> str:
    variable = "AWS_DEFAULT_REGION" if env_str(env, "AWS_DEFAULT_REGION") and not env_str(env, "AWS_REGION") \
        else "AWS_REGION"
    region = env_str(env, variable) or DEFAULT_REGION
    if not _REGION.match(region):
        raise ConfigError(variable, f"{region!r} is not an AWS region; expected e.g. {DEFAULT_REGION}")
    for model_id in model_ids:
        match = _BEDROCK_ID.match(model_id)
        geography = match.group(1) if match else None
        if geography in _PROFILE_REGIONS and not _in_geography(region, _PROFILE_REGIONS[geography]):
            raise ConfigError(variable, f"{region!r} cannot call the {geography}. inference profile {model_id}; "
                                        f"use a region of that geography (e.g. {DEFAULT_REGION} for jp.)")
    return region


def _in_geography(region: str, allowed: tuple[str, ...]) -> bool:
    return any(region.startswith(a) if a.endswith("-") else region == a for a in allowed)


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

        def attempt(left: float) -> Any:
            return self.client.messages.create(timeout=self._timeout(left), **kwargs)

        def on_retry(attempt: int, failure: BaseException, wait: float) -> None:
            retries.append(f"attempt {attempt} failed ({failure_text(failure)}); retrying in {wait:.1f} s")

        try:
            clock, sleep = (request.clock, request.clock.sleep) if request.clock else (self.clock, self.sleep)
            message = call(attempt, retryable=self._retryable, budget=Budget(request.deadline, clock, MIN_ATTEMPT_S),
                           sleep=sleep, on_retry=on_retry)
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

    def _retryable(self, exc: BaseException) -> Retry | None:
        if _is_unreachable(exc):
            return Retry(UNREACHABLE_POLICY)
        if not _is_retryable(exc):
            return None
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return Retry(self.policy, server_wait(headers) if headers is not None else None)

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
    import httpx2

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

        hook = (names or NameResolution.shared()).hook(httpx2)
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
    if not config.bearer_token and os.environ.get("AWS_BEARER_TOKEN_BEDROCK") == "":
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
