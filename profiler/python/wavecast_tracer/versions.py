"""Which torch releases wavecast traces with, and which its figures are checked against."""

import re

OLDEST_TORCH = (1, 13)  # the oldest the tracer runs with (Debian 12's python3-torch)
VALIDATED_TORCH = (2, 0)  # docs/accuracy.md's figures come from torch 2.x


def release(version):
    """(major, minor) of a torch version string such as "2.11.0+cu130" or "1.13.0a0"."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
