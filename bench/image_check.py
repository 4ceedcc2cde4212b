"""Bench: what decoding an image whole costs before it is shown to the model (mcp_lib.media.decoded_image), for
4000x3000 px images near the API's 3.75 MB: a JPEG photo (smooth shapes and grain) and a PNG screenshot (flat
areas and a band of noise), each read as an in-house server's image and as a Slack attachment.

    uv run python bench/image_check.py [--runs 5]

Each time is the median of ``--runs`` runs (``time.perf_counter``; one warming run first), shown beside the
yardstick and as ratios to what the same path did before in the same run: ``header`` is the base64 decode and
the header read that ``check_base64_image`` did alone, ``b64encode`` what the Slack path does with the image next.
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageDraw  # noqa: E402
from yardstick import Yardstick  # noqa: E402

from agent.slack.files import read_image  # noqa: E402
from mcp_lib import media  # noqa: E402

SIZE = (4000, 3000)


def jpeg() -> bytes:
    """The highest quality that keeps a grainy photo within MAX_IMAGE_BYTES."""
    base = Image.linear_gradient("L").resize(SIZE).convert("RGB")
    draw = ImageDraw.Draw(base)
    for n in range(40):
        draw.ellipse((n * 97 % 3600, n * 61 % 2600, n * 97 % 3600 + 400, n * 61 % 2600 + 400),
                     fill=(n * 37 % 256, n * 91 % 256, n * 53 % 256))
    photo = Image.blend(base, Image.effect_noise(SIZE, 40).convert("RGB"), 0.25)
    for quality in range(95, 40, -1):
        out = io.BytesIO()
        photo.save(out, format="JPEG", quality=quality)
        if out.tell() <= media.MAX_IMAGE_BYTES:
            return out.getvalue()
    raise SystemExit("no quality fits")


def png() -> bytes:
    """A flat screen with a band of noise rows: as many rows as keep it within MAX_IMAGE_BYTES."""
    screen = Image.new("RGB", SIZE, (240, 240, 240))
    rows = 380
    while True:
        screen.paste(Image.effect_noise((SIZE[0], rows), 64).convert("RGB"), (0, 1000))
        out = io.BytesIO()
        screen.save(out, format="PNG")
        if out.tell() <= media.MAX_IMAGE_BYTES:
            return out.getvalue()
        screen.paste((240, 240, 240), (0, 1000, SIZE[0], 1000 + rows))
        rows -= 4


def timed(runs: int, run: Callable[..., object], *args: object) -> float:
    run(*args)
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    ys = Yardstick()
    for name, data in (("JPEG", jpeg()), ("PNG", png())):
        text = base64.b64encode(data).decode("ascii")
        assert media.check_base64_image(text) == (f"image/{name.lower()}", *SIZE, len(data))
        header = timed(runs, lambda t: media._header(base64.b64decode(t, validate=True)), text)  # the check before
        checked = timed(runs, media.check_base64_image, text)
        ys.sample()
        read = timed(runs, read_image, data)
        encode = timed(runs, base64.b64encode, data)
        ys.sample()
        print(f"{name} {SIZE[0]}x{SIZE[1]}, {len(data) / 1e6:.2f} MB")
        print(f"  tool image: check_base64_image {ys.show(checked)}; header only {ys.show(header)}: "
              f"{checked / header:.0f}x, the decode adds {ys.show(checked - header)}")
        print(f"  attachment: read_image {ys.show(read)}; b64encode {ys.show(encode)}: {read / encode:.0f}x")
    print(ys.line())


if __name__ == "__main__":
    main()
