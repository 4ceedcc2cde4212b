"""The Lambda relay package, built from uv.lock with only what the relay imports, and its cold import time.

    uv run python bench/lambda_package.py                       # python3.12 x86_64: build, size, import times
    uv run python bench/lambda_package.py --python 3.13 --arch arm64 --out relay.zip   # build and keep the zip

The package is what docs/slack-setup.md tells a team to build: the lock's versions of the ``relay`` dependency
group only (`uv export --frozen --only-group relay --no-emit-project`: anyio, httpx2, pydantic, slack-sdk,
tenacity and what they need -- not the agent's boto3, anthropic, mcp, ...), installed into a target directory
for the Lambda platform with ``--python-platform``, plus helpbot itself with ``--no-deps``, bytecode compiled by
the interpreter of the runtime's version (``--python``: Lambda's /var/task is read-only, and a
``*.cpython-311.pyc`` is ignored by python3.12, which then compiles every module again on every cold start).
The script refuses a build whose bytecode tags are not the runtime's.

It then proves the package complete: in a fresh process of that interpreter with only the package on
``sys.path`` (``-S``, ``PYTHONDONTWRITEBYTECODE=1`` as on Lambda), ``lambda_handler`` answers a signed
``url_verification``. Import times (``import agent.slack.relay``, fresh processes, median) are measured with the
shipped bytecode and without it, when the package's architecture is this machine's.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUP = "relay"  # pyproject.toml [dependency-groups]
HANDLER_MODULE = "agent.slack.relay"
PLATFORMS = {"x86_64": "x86_64-manylinux2014", "arm64": "aarch64-manylinux2014"}  # Lambda's two architectures
MACHINE = {"x86_64": "x86_64", "arm64": "aarch64"}
SMOKE_SECRET = "bench-signing-secret"


def interpreter(python: str) -> Path:
    """The interpreter to build with: a path, or a version uv can find -- one uv installed first (``uv python
    install 3.12``), since a ``python3.12`` on PATH may be a pyenv shim for a version pyenv does not have."""
    if os.sep in python:
        return Path(python)
    for managed in (["--managed-python"], []):
        found = subprocess.run(["uv", "python", "find", "--no-project", *managed, python], capture_output=True,
                               text=True)
        path = Path(found.stdout.strip())
        if found.returncode == 0 and subprocess.run([str(path), "-c", ""], capture_output=True).returncode == 0:
            return path
    sys.exit(f"lambda_package: no working Python {python} here; install it (`uv python install {python}`) or pass "
             "its path with --python")


def run_python(python: Path, code: str, package: Path, extra_env: dict[str, str] | None = None) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package), "PYTHONDONTWRITEBYTECODE": "1", **(extra_env or {})}
    done = subprocess.run([str(python), "-S", "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"lambda_package: the package failed in {python.name}:\n{done.stderr.strip()}")
    return done.stdout.strip()


def build(target: Path, python: Path, arch: str, *, compile_bytecode: bool) -> None:
    requirements = target.parent / "requirements.txt"
    subprocess.run(["uv", "export", "--frozen", "--only-group", GROUP, "--no-emit-project", "--format",
                    "requirements-txt", "--output-file", str(requirements), "--quiet"], cwd=ROOT, check=True)
    common = ["--target", str(target), "--quiet", "--python", str(python), "--python-platform", PLATFORMS[arch],
              "--compile-bytecode" if compile_bytecode else "--no-compile-bytecode"]
    subprocess.run(["uv", "pip", "install", "--require-hashes", "-r", str(requirements), *common], cwd=ROOT,
                   check=True)
    subprocess.run(["uv", "pip", "install", "--no-deps", str(ROOT), *common], cwd=ROOT, check=True)


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bytecode_tags(path: Path) -> dict[str, int]:
    tags: dict[str, int] = {}
    for file in path.rglob("*.pyc"):
        tag = file.name.split(".")[-2]
        tags[tag] = tags.get(tag, 0) + 1
    return tags


def zip_to(target: Path, out: Path) -> int:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(target.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(target))
    return out.stat().st_size


def smoke(python: Path, package: Path) -> str:
    """``lambda_handler``, with only the package on the path, answers a signed url_verification and a signed
    reaction it ignores (which logs: the guard's import chain runs)."""
    def signed(payload: dict[str, object]) -> dict[str, object]:
        body = json.dumps(payload)
        stamp = str(int(time.time()))
        digest = hmac.new(SMOKE_SECRET.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
        return {"version": "2.0", "requestContext": {"http": {"method": "POST"}}, "isBase64Encoded": False,
                "headers": {"x-slack-request-timestamp": stamp, "x-slack-signature": f"v0={digest}",
                            "content-type": "application/json"}, "body": body}

    events = [signed({"type": "url_verification", "challenge": "bench"}),
              signed({"type": "event_callback", "event_id": "EvBench", "event": {
                  "type": "reaction_added", "user": "U0BENCH", "reaction": "thumbsup", "item_user": "U0OTHER",
                  "item": {"type": "message", "channel": "C0BENCH01", "ts": "1700000000.123456"}}})]
    code = (f"import json; from {HANDLER_MODULE} import lambda_handler; "
            f"print(json.dumps([lambda_handler(e, None) for e in json.loads({json.dumps(events)!r})]))")
    challenge, ignored = json.loads(run_python(python, code, package, {
        "SLACK_SIGNING_SECRET": SMOKE_SECRET, "GITHUB_REPOSITORY": "acme/helpbot", "HELPBOT_DISPATCH_TOKEN": "x"}))
    if challenge.get("statusCode") != 200 or json.loads(challenge.get("body") or "{}") != {"challenge": "bench"}:
        sys.exit(f"lambda_package: lambda_handler answered {challenge}")
    if ignored.get("statusCode") != 200:
        sys.exit(f"lambda_package: lambda_handler answered an ignored reaction with {ignored}")
    return "url_verification and an ignored reaction answered"


def import_seconds(python: Path, package: Path, runs: int) -> list[float]:
    code = f"import time; t = time.perf_counter(); import {HANDLER_MODULE}; print(time.perf_counter() - t)"
    return [float(run_python(python, code, package)) for _ in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="the runtime's Python: a version or a path (default 3.12)")
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="x86_64", help="the function's architecture")
    parser.add_argument("--out", type=Path, help="keep the zip here")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    python = interpreter(args.python)
    version = run_python(python, "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')", Path("/"))
    tag = f"cpython-{version.replace('.', '')}"
    native = platform.machine() == MACHINE[args.arch]
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "build"
        build(target, python, args.arch, compile_bytecode=True)
        tags = bytecode_tags(target)
        if set(tags) != {tag}:
            sys.exit(f"lambda_package: bytecode tags {tags}, not only {tag}: it would be compiled again on Lambda")
        zipped = zip_to(target, Path(tmp) / "relay.zip")
        print(f"package for python{version} {PLATFORMS[args.arch]} (group {GROUP!r} of uv.lock, bytecode {tags}): "
              f"{size(target) / 2**20:.1f} MiB unpacked, {zipped / 2**20:.1f} MiB zipped")
        if args.out:
            shutil.copy(Path(tmp) / "relay.zip", args.out)
            print(f"wrote {args.out}")
        if not native:
            print(f"not run: the package is for {args.arch}, this machine is {platform.machine()}")
            return 0
        print(f"complete: {smoke(python, target)} with only the package on sys.path")
        warm = import_seconds(python, target, args.runs)
        plain = Path(tmp) / "plain"
        build(plain, python, args.arch, compile_bytecode=False)
        cold = import_seconds(python, plain, args.runs)
        print(f"import {HANDLER_MODULE} (python{version}, {args.runs} fresh processes, median):")
        print(f"  with the shipped bytecode:  {statistics.median(warm) * 1000:.0f} ms (min {min(warm) * 1000:.0f})")
        print(f"  without (compiled per run): {statistics.median(cold) * 1000:.0f} ms (min {min(cold) * 1000:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
