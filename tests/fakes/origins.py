"""Other origins on loopback, for the credentials' doors: a server that records what reached it (and whether a
credential came with it), and one that redirects everything there. Real HTTP (:func:`tests.fakes.github.serve`),
ports chosen by the OS and read back.

    with recording(answer) as elsewhere, recording(redirect_to(elsewhere)) as configured:
        ...  # point a client at configured.url; then elsewhere.seen / elsewhere.credentials(secret)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx2

from tests.fakes.github import serve

CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-amz-security-token", "x-redmine-api-key")


@dataclass
class Recorder:
    """What a local server received; it answers with ``answer``."""

    answer: Callable[[httpx2.Request], httpx2.Response]
    seen: list[httpx2.Request] = field(default_factory=list)
    url: str = ""  # http://127.0.0.1:PORT

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        return self.answer(request)

    def credentials(self, *secrets: str) -> list[str]:
        """Every credential header that arrived here, and every URL, header or body holding one of ``secrets``."""
        found: list[str] = []
        for request in self.seen:
            texts = [str(request.url), request.content.decode("utf-8", "replace"),
                     *(f"{k}: {v}" for k, v in request.headers.items())]
            found += [text for text in texts if any(secret in text for secret in secrets)]
            found += [k for k in request.headers if k.lower() in CREDENTIAL_HEADERS]
        return found


@contextmanager
def recording(answer: Callable[[httpx2.Request], httpx2.Response]) -> Iterator[Recorder]:
    recorder = Recorder(answer)
    with serve(recorder) as url:
        recorder.url = url
        yield recorder


def refusing(request: httpx2.Request) -> httpx2.Response:
    """Any answer will do: the point is what arrived."""
    return httpx2.Response(200, json={"ok": False, "error": "elsewhere"})


def redirect_to(target: Recorder, status: int = 302) -> Callable[[httpx2.Request], httpx2.Response]:
    """Every request redirected to the same path on ``target``."""
    return lambda request: httpx2.Response(status, headers={"Location": f"{target.url}"
                                                                       f"{request.url.raw_path.decode()}"})
