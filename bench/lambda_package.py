"""The Lambda relay package, built from uv.lock, and its cold import time.

    uv run python bench/lambda_package.py            # build for this interpreter, measure size and import time
    uv run python bench/lambda_package.py --lambda   # build for Lambda (x86_64, this Python's version), size only
    uv run python bench/lambda_package.py --out relay.zip --lambda   # ... and keep the zip to upload

Bytecode is compiled by the interpreter that builds (a python3.11 build holds ``*.cpython-311.pyc``, which a
python3.12 runtime ignores and compiles again on every cold start): choose the Lambda runtime of the building
Python (`uv run --python 3.12 python bench/lambda_package.py --lambda` for python3.12). The script prints the
tags it finds.

The package is what docs/slack-setup.md tells a team to build: `uv export --frozen --no-dev` (the locked
versions, no dev tools), installed into a target directory with bytecode compiled, plus helpbot itself. Lambda's
/var/task is read-only, so without compiled bytecode every cold start compiles every module it imports again;
the import time is measured both ways in fresh processes of the base interpreter (no venv, only the package on
sys.path, PYTHONDONTWRITEBYTECODE=1 as on Lambda).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLER_MODULE = "agent.slack.relay"
LAMBDA = ["--python-platform", "x86_64-manylinux2014"]


def build(target: Path, *, compile_bytecode: bool, for_lambda: bool) -> None:
    requirements = target.parent / "requirements.txt"
    subprocess.run(["uv", "export", "--frozen", "--no-dev", "--no-emit-project", "--format", "requirements-txt",
                    "--output-file", str(requirements), "--quiet"], cwd=ROOT, check=True)
    common = ["--target", str(target), "--quiet", "--python", sys.executable, *(LAMBDA if for_lambda else [])]
    common.append("--compile-bytecode" if compile_bytecode else "--no-compile-bytecode")
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


def import_seconds(target: Path, runs: int) -> list[float]:
    """``import agent.slack.relay`` in fresh processes of the base interpreter with only the package on the path."""
    python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    code = ("import time; t = time.perf_counter(); import " + HANDLER_MODULE
            + "; print(time.perf_counter() - t)")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(target), "PYTHONDONTWRITEBYTECODE": "1"}
    times = []
    for _ in range(runs):
        done = subprocess.run([str(python), "-s", "-c", code], env=env, capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip()))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lambda", dest="for_lambda", action="store_true", help="build for python3.12 x86_64")
    parser.add_argument("--out", type=Path, help="keep the zip here")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "build"
        build(target, compile_bytecode=True, for_lambda=args.for_lambda)
        zipped = zip_to(target, Path(tmp) / "relay.zip")
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        print(f"package (bytecode compiled): {size(target) / 2**20:.1f} MiB unpacked, {zipped / 2**20:.1f} MiB zipped"
              f" -- for python{version}{' x86_64-manylinux2014' if args.for_lambda else ' (this machine)'}; "
              f"bytecode tags {bytecode_tags(target)}")
        if args.out:
            shutil.copy(Path(tmp) / "relay.zip", args.out)
            print(f"wrote {args.out}")
        if args.for_lambda:
            return 0
        warm = import_seconds(target, args.runs)
        plain = Path(tmp) / "plain"
        build(plain, compile_bytecode=False, for_lambda=False)
        cold = import_seconds(plain, args.runs)
        print(f"import {HANDLER_MODULE} (python{version}, {args.runs} fresh processes, median):")
        print(f"  with compiled bytecode:    {statistics.median(warm) * 1000:.0f} ms (min {min(warm) * 1000:.0f})")
        print(f"  without (compiled per run): {statistics.median(cold) * 1000:.0f} ms (min {min(cold) * 1000:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
