"""The heavy half of the redmine platform: python-redmine's client, its read-only engine, one tool call's session
(imported only when a Redmine tool runs, so a run without Redmine never loads python-redmine or requests)."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar
from urllib.parse import quote, urlparse

import requests
import urllib3
from redminelib import Redmine, exceptions
from redminelib.engines.sync import SyncEngine

from ...clock import SYSTEM_CLOCK, Clock
from ...core import CredentialsError, ToolContext, ToolError
from ...doors import Door, door, origin
from ...errors import NotFound, Redirected, Retryable
from ...http import check_answer, read_capped, retried
from ...retry import tool_budget
from . import PROJECT_IDENT, RedmineConfig

T = TypeVar("T")


class DoorSession(requests.Session):
    """requests' session with the key through REDMINE_URL's door (:mod:`mcp_lib.doors`): every request it sends,
    redirect hops included, is checked, and a hop to another origin goes without the key (requests itself strips
    only ``Authorization``, not ``X-Redmine-API-Key``)."""

    door: Door

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.door.guard(str(request.url), request.headers.items())
        return super().send(request, **kwargs)

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        super().rebuild_auth(prepared_request, response)
        if not self.door.allows(str(prepared_request.url)):
            for name, value in list(prepared_request.headers.items()):
                if self.door.carries("", [(name, value)]):
                    del prepared_request.headers[name]


def capped(response: requests.Response, **_: Any) -> None:
    """A response hook (before requests reads the body whole): the body read now, decoded, at most
    :data:`~mcp_lib.http.MAX_ANSWER_BYTES`; what requests reads afterwards is this copy."""
    with response.raw as raw:
        response.raw = io.BytesIO(read_capped(raw.stream(2**16, decode_content=True), "Redmine"))


class Engine(SyncEngine):
    """python-redmine's requests engine, read-only, with what is worth another try raised as Retryable (the
    decision :mod:`mcp_lib.http` makes for httpx2); its session is a :class:`DoorSession`, its answers
    :func:`capped`. python-redmine wants an engine class: each client's is a subclass holding its door."""

    door: Door
    clock: Clock = SYSTEM_CLOCK  # the registry's, set by each call's Session (a Retry-After date is on its wall)

    def create_session(self, **params: Any) -> requests.Session:
        session = DoorSession()
        session.door = self.door
        for name, value in params.items():
            setattr(session, name, value)
        session.hooks["response"].append(capped)  # each answer, each redirect hop's too
        return session

    def request(self, method: str, url: str, headers: Any = None, params: Any = None, data: Any = None) -> Any:
        if method.lower() != "get":
            raise ToolError(f"refused: the Redmine tools are read-only (attempted {method.upper()} {url})")
        try:
            return super().request(method, url, headers=headers, params=params, data=data)
        except (requests.Timeout, urllib3.exceptions.TimeoutError) as exc:  # urllib3's: in :func:`capped`'s read
            raise Retryable(f"Redmine did not answer in time ({type(exc).__name__})") from exc
        except (requests.ConnectionError, urllib3.exceptions.ProtocolError) as exc:  # ProtocolError: cut short
            raise Retryable(f"cannot connect to Redmine at {url.split('?')[0]} ({type(exc).__name__})") from exc

    def construct_request_kwargs(self, method: str, headers: Any, params: Any, data: Any) -> dict[str, Any]:
        # python-redmine stores requests={"timeout": ...} on the Session, where requests ignores it: pass it on.
        kwargs: dict[str, Any] = SyncEngine.construct_request_kwargs(method, headers, params, data)
        kwargs["timeout"] = self.requests.get("timeout")
        return kwargs

    def process_response(self, response: requests.Response) -> Any:
        check_answer(response.status_code, response.headers, self.clock)
        if response.history:
            if not self.door.allows(str(response.url)):  # its answer is not Redmine's
                raise ToolError(f"Redmine redirected the request to another origin ({origin(str(response.url))}); "
                                "the answer is not used: check REDMINE_URL (scheme, host and port)")
            landed = urlparse(str(response.url)).path
            if urlparse(str(response.history[0].request.url)).path != landed:  # a wiki redirect: a moved page
                raise Redirected(landed)
        return super().process_response(response)


@dataclass
class RedmineClient:
    """python-redmine's ``Redmine`` plus what one process learns once: whether the key is good, project ids."""

    api: Redmine
    key_checked: bool = False
    project_ids: dict[str, int | None] = field(default_factory=dict)  # identifier -> id (None: no such project)


def make_client(config: RedmineConfig) -> RedmineClient:
    engine = type("Engine", (Engine,), {"door": door("REDMINE_API_KEY", config.url, config.api_key)})
    return RedmineClient(Redmine(config.url, key=config.api_key, engine=engine, requests={"timeout": config.timeout_s}))


class Session:
    """One tool call's requests: retried under one time budget; library errors become clear ToolErrors."""

    def __init__(self, ctx: ToolContext):
        self.client: RedmineClient = ctx.client
        self.config: RedmineConfig = ctx.config
        self.api = self.client.api
        type(self.api.engine).clock = ctx.clock  # the client's own engine class, one registry's: always its clock
        self.base = self.config.url
        self.budget = tool_budget(ctx, self.config.retry_budget_s)  # all requests of the call together

    def call(self, fn: Callable[[], T], not_found: str = "not found in Redmine") -> T:
        if not self.client.key_checked:
            # Redmine treats an unknown key as anonymous and still shows public projects: ask who we are once.
            self._call(lambda: self.api.user.get("current"), not_found)
            self.client.key_checked = True
        return self._call(fn, not_found)

    def _call(self, fn: Callable[[], T], not_found: str) -> T:
        try:
            return retried("Redmine", fn, self.budget)
        except exceptions.AuthError:
            raise CredentialsError("Redmine rejected the API key (HTTP 401): check REDMINE_API_KEY") from None
        except exceptions.ForbiddenError:
            raise ToolError("Redmine refused access (HTTP 403): the REST API may be disabled, or the user of "
                            "REDMINE_API_KEY may not see this") from None
        except (exceptions.ResourceNotFoundError, exceptions.ResourceRequirementsError):
            raise NotFound(not_found) from None
        except exceptions.JSONDecodeError:
            raise ToolError("Redmine's answer is not JSON: check that REDMINE_URL is the Redmine base URL") from None
        except exceptions.BaseRedmineError as exc:
            raise ToolError(f"Redmine error: {type(exc).__name__}: {exc}") from None

    # -- the allowlist ----------------------------------------------------------------------------------------
    def check_project(self, project: str) -> None:
        if not PROJECT_IDENT.match(project):
            raise ToolError(f"project {project!r} is not a project identifier (as in /projects/IDENT, e.g. ec-sync)")
        if not self.config.allows(project):
            raise ToolError(f"project {project!r} is outside HELPBOT_REDMINE_PROJECTS; allowed: "
                            + ", ".join(self.config.projects))

    def allowed_ids(self) -> set[int] | None:
        """Ids of the allowlisted projects (None when every project is allowed)."""
        if not self.config.projects:
            return None
        for ident in self.config.projects:
            if ident not in self.client.project_ids:
                try:
                    self.client.project_ids[ident] = int(self.call(partial(self.api.project.get, ident)).id)
                except NotFound:  # an allowlisted project that does not exist (any more) allows nothing
                    self.client.project_ids[ident] = None
        return {pid for ident in self.config.projects if (pid := self.client.project_ids[ident]) is not None}

    def hidden(self, issue: Mapping[str, Any] | None) -> bool:
        """An issue that must not be shown: private, outside the allowed projects, or unknown (not visible to
        the key: nothing to show, nothing to vouch for)."""
        if issue is None or issue.get("is_private"):
            return True
        ids = self.allowed_ids()
        return ids is not None and issue.get("project", {}).get("id") not in ids

    def per_project(self, project: str | None, fetch: Callable[[str | None], T]) -> list[T]:
        """``fetch`` of each project to search: the one asked for, else each allowed project on its own, else
        all (None). An allowlisted project that does not exist (any more) is skipped; the one asked for is not."""
        if project:
            self.check_project(project)
            return [fetch(project)]
        found = []
        scopes: list[str | None] = list(self.config.projects) or [None]
        for scope in scopes:
            with suppress(NotFound):
                found.append(fetch(scope))
        return found

    # -- shared lookups -------------------------------------------------------------------------------------------
    def issues_by_id(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        """Project, status and subject of many issues in one request (open and closed)."""
        if not ids:
            return {}
        unique = sorted(set(ids))[:100]
        found = self.issues({"issue_id": ",".join(map(str, unique)), "status_id": "*", "limit": len(unique)})
        return {int(raw["id"]): raw for raw in found}

    def issues(self, filters: Mapping[str, Any], not_found: str = "not found in Redmine") -> list[dict[str, Any]]:
        """The issues of one filter request, as the JSON Redmine sent (forcing python-redmine's lazy set)."""
        return self.call(lambda: [issue.raw() for issue in self.api.issue.filter(**filters)], not_found)

    def issue(self, issue_id: int, include: list[str], not_found: str = "not found in Redmine") -> dict[str, Any]:
        """One issue with the associations named in ``include``, as the JSON Redmine sent."""
        return self.call(lambda: self.api.issue.get(issue_id, include=include).raw(), not_found)

    def get_json(self, path: str, not_found: str, params: Mapping[str, Any] | None = None) -> Any:
        """A GET under REDMINE_URL that python-redmine has no resource for (search, a wiki page by title)."""
        return self.call(partial(self.api.engine.request, "get", f"{self.base}{path}", params=params), not_found)

    def issue_url(self, issue_id: int) -> str:
        return f"{self.base}/issues/{issue_id}"

    def wiki_url(self, project: str, title: str) -> str:
        return f"{self.base}/projects/{project}/wiki/{quote(title, safe='')}"


