"""The relay's stdlib server under load: a thousand connections at once, stalled or
racing the same signed delivery, and a chunked body without Content-Length -- each Slack event dispatched exactly
once, and Slack's real delivery still answered."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx2

from tests.fakes.relay import BODY, GitHub, address, serving, signed


def test_a_thousand_stalled_connections_do_not_keep_slacks_delivery_out() -> None:
    github = GitHub()
    with serving(github, timeout=30.0, deadline=30.0) as url:
        stalled: list[socket.socket] = []
        try:
            for _ in range(1000):
                sock = socket.create_connection(address(url), timeout=10)
                sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n")
                stalled.append(sock)
            answered = httpx2.post(url, content=BODY, headers=signed(BODY), timeout=10)
            assert (answered.status_code, answered.text) == (200, "ok")
        finally:
            for sock in stalled:
                sock.close()
    assert len(github.requests) == 1


def test_the_same_delivery_on_two_hundred_connections_at_once_dispatches_once() -> None:
    github = GitHub()
    start = threading.Barrier(50)
    with serving(github, timeout=30.0, deadline=30.0) as url:

        def deliver(n: int) -> int:
            headers = signed(BODY)
            if n % 2:
                headers = {**headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_error"}
            if n < 50:
                start.wait()
            return httpx2.post(url, content=BODY, headers=headers, timeout=20).status_code

        with ThreadPoolExecutor(50) as pool:
            codes = list(pool.map(deliver, range(200)))
    assert set(codes) == {200}
    assert len(github.requests) == 1


def test_a_chunked_body_without_content_length_is_refused_without_dispatch() -> None:
    github = GitHub()
    head = "".join(f"{k}: {v}\r\n" for k, v in signed(BODY).items())
    with serving(github, timeout=5.0, deadline=5.0) as url, socket.create_connection(address(url), timeout=10) as sock:
        sock.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode()
                     + f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n")
        answer = sock.recv(1000)
    assert answer.startswith(b"HTTP/1.0 411") or answer.startswith(b"HTTP/1.1 411"), answer
    assert github.requests == []
