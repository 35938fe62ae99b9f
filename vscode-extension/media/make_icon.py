"""Draws media/icon.png, the extension's 128x128 icon: per-line bars under a wave.

Run with any Python that has Pillow (Debian: python3-pil): python3 media/make_icon.py
"""
import math
from pathlib import Path

from PIL import Image, ImageDraw

SIZE = 128
SCALE = 4  # drawn large, then downsampled, for smooth edges
BACKGROUND = (30, 41, 59)
BARS = [(56, 189, 248), (56, 189, 248), (251, 146, 60), (56, 189, 248), (56, 189, 248)]
WAVE = (226, 232, 240)


def main() -> None:
    big = SIZE * SCALE
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=24 * SCALE, fill=BACKGROUND)
    # Horizontal bars: one line each, one of them slow (orange).
    widths = [0.45, 0.62, 0.86, 0.38, 0.55]
    left, top, height, gap = 18 * SCALE, 50 * SCALE, 9 * SCALE, 5 * SCALE
    for i, (width, colour) in enumerate(zip(widths, BARS)):
        y = top + i * (height + gap)
        right = left + int(width * (big - 2 * left))
        draw.rounded_rectangle((left, y, right, y + height), radius=height // 2, fill=colour)
    # The wave across the top.
    points = []
    for step in range(0, 201):
        x = left + (big - 2 * left) * step / 200
        y = 30 * SCALE - 12 * SCALE * math.sin(step / 200 * 2 * math.pi * 1.5)
        points.append((x, y))
    draw.line(points, fill=WAVE, width=5 * SCALE, joint="curve")
    image.resize((SIZE, SIZE), Image.LANCZOS).save(Path(__file__).with_name("icon.png"), optimize=True)


if __name__ == "__main__":
    main()
