"""Where each credential may travel: the origin (scheme, host, port) of its configured service, and nowhere else.

Every client that attaches a credential checks its :class:`Door` before each request it sends, redirect hops
included (httpx2 request hooks, slack-sdk's urllib, python-redmine's requests); redirects never carry a credential.
Origins compare strictly: the scheme exactly, the host after IDNA and trailing-dot normalisation, the default port
filled in; a URL with userinfo, a backslash or ``%`` in its authority has no origin (parsers may disagree on it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from .errors import Refused

DEFAULT_PORTS = {"http": 80, "https": 443}
# Where Slack serves url_private / url_private_download (https://api.slack.com/types/file): the file host of
# Slack's own API origin. A Slack API URL pointed elsewhere (a proxy, the tests' fake) serves its files itself.
SLACK_FILE_HOSTS = {"slack.com": ("files.slack.com",)}
ANTHROPIC_URL = "https://api.anthropic.com"
BEDROCK_URL = "https://bedrock-runtime.{region}.amazonaws.com"

# Each declared secret that travels on the wire, and the variable naming where it goes.
WHERE: Mapping[str, str] = {
    "SLACK_BOT_TOKEN": "SLACK_API_URL",  # and Slack's file hosts (SLACK_FILE_HOSTS)
    "SLACK_USER_TOKEN": "SLACK_API_URL",
    "GITHUB_TOKEN": "GITHUB_API_URL",
    "HELPBOT_FAQ_PR_TOKEN": "GITHUB_API_URL",
    "HELPBOT_DISPATCH_TOKEN": "GITHUB_API_URL",
    "GROWI_ACCESS_TOKEN": "GROWI_URL",
    "REDMINE_API_KEY": "REDMINE_URL",
    "AWS_BEARER_TOKEN_BEDROCK": "ANTHROPIC_BEDROCK_BASE_URL",
    "AWS_ACCESS_KEY_ID": "ANTHROPIC_BEDROCK_BASE_URL",  # named in the SigV4 Authorization header
    "AWS_SESSION_TOKEN": "ANTHROPIC_BEDROCK_BASE_URL",  # X-Amz-Security-Token
    "ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL",
}
# Headers that are credentials whatever their value (a hop without them carries none).
CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "x-amz-security-token", "x-redmine-api-key"})
# Declared secrets that are never sent anywhere, and why.
NEVER_SENT: Mapping[str, str] = {
    "SLACK_SIGNING_SECRET": "verifies Slack's signatures on the relay",
    "AWS_SECRET_ACCESS_KEY": "signs Bedrock requests (SigV4); only the signature travels",
}


@dataclass(frozen=True, order=True)
class Origin:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        port = "" if DEFAULT_PORTS.get(self.scheme) == self.port else f":{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}"


def origin(url: str) -> Origin | None:
    """The origin of an absolute http(s) URL, normalised; None when it has none this module vouches for."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.netloc or any(c in parts.netloc for c in "@\\% \t\r\n"):
        return None
    host = (parts.hostname or "").removesuffix(".")  # the fully qualified spelling is the same host
    if not host or host.endswith(".") or ".." in host:
        return None
    if ":" not in host:  # not an IPv6 literal: a DNS name, IDNA-encoded so that look-alikes compare as what they are
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return Origin(scheme, host.lower(), port if port is not None else DEFAULT_PORTS[scheme])


@dataclass(frozen=True)
class Door:
    """A credential (named by its variable, never shown) and the only origins it may be sent to."""

    credential: str
    origins: frozenset[Origin]
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def allows(self, url: str) -> bool:
        found = origin(url)
        return found is not None and found in self.origins

    def check(self, url: str) -> None:
        """Raise :class:`Refused` unless ``url`` is on one of the door's origins."""
        if not self.allows(url):
            where = origin(url) or "a URL without a plain origin"
            raise Refused(f"refused: {self.credential} is sent only to {', '.join(map(str, sorted(self.origins)))},"
                          f" not to {where}")

    def carries(self, url: str, headers: Iterable[tuple[str, Any]]) -> bool:
        """One of the door's values in the URL (raw or percent-decoded) or a header, or any credential header
        (a value botocore resolved from a profile is not known here; its signature is still a credential)."""
        pairs = list(headers)
        if any(name.lower() in CREDENTIAL_HEADERS for name, _ in pairs):
            return True
        texts = [str(url), unquote(str(url)), *(f"{name}: {value}" for name, value in pairs)]
        return any(secret in text for secret in self.secrets for text in texts)

    def guard(self, url: str, headers: Iterable[tuple[str, Any]]) -> None:
        """Refuse a request that carries the credential outside the door; let anything else pass."""
        if self.carries(url, headers):
            self.check(url)

    def hook(self) -> Callable[[Any], None]:
        """An httpx2 request hook: every request the client sends, redirect hops included."""
        return lambda request: self.guard(str(request.url), request.headers.items())

    def async_hook(self) -> Callable[[Any], Any]:
        """:meth:`hook` for an ``AsyncClient``, whose hooks are awaited."""

        async def check(request: Any) -> None:
            self.guard(str(request.url), request.headers.items())

        return check


def _secrets(values: Iterable[str | None]) -> tuple[str, ...]:
    return tuple(v for v in (value.strip() if value else "" for value in values) if v)


def door(credential: str, url: str, *secrets: str | None) -> Door:
    """The door of ``credential`` (a variable of :data:`WHERE`, or an in-house server's ``header_env``): the origin
    of ``url``, the service's configured base URL."""
    found = origin(url)
    return Door(credential, frozenset({found} if found is not None else ()), _secrets(secrets))


def slack_door(api_url: str, *tokens: str | None) -> Door:
    """The Slack tokens' door: the Slack API URL's origin and, for Slack's own, its file hosts on 443 only."""
    api = origin(api_url)
    origins = {api} if api is not None else set()
    if api is not None and api.scheme == "https" and api.port == 443:
        origins |= {Origin("https", host, 443) for host in SLACK_FILE_HOSTS.get(api.host, ())}
    return Door("SLACK_BOT_TOKEN/SLACK_USER_TOKEN", frozenset(origins), _secrets(tokens))
