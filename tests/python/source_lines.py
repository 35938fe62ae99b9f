"""Where a text stands in a source file, for tests that check the lines a trace names."""


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
