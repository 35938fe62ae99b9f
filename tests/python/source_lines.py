"""Scripts for tests: written to a temporary folder, and where a text stands in a source file
(for tests that check the lines a trace names)."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def script_file(source, name="script.py"):
    """`source` written as `name` in a temporary folder, while the block runs; yields its path."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        yield path


def line_of(path, text, occurrence=1):
    """Line number of the `occurrence`-th line of `path` containing `text`."""
    seen = 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if text in line:
                seen += 1
                if seen == occurrence:
                    return number
    raise AssertionError(f"{text!r} not found in {path}")
