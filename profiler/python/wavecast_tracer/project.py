"""Which source files belong to the user's project."""

import os
import sys

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


class Project:
    """The directory of the user's entry file, minus installed packages inside it."""

    def __init__(self, entry_file):
        self.entry_file = os.path.abspath(entry_file)
        self.root = os.path.dirname(self.entry_file)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._cache = {}

    def contains(self, filename):
        known = self._cache.get(filename)
        if known is not None:
            return known
        path = os.path.abspath(filename) if filename and not filename.startswith("<") else ""
        inside = (
            path.startswith(self._prefix)
            and not path.startswith(_PACKAGE_DIR)
            and not any(marker in path for marker in _LIBRARY_MARKERS)
        )
        self._cache[filename] = inside
        return inside

    def site(self):
        """(file, line) of the innermost project frame running now; ("", 0) outside."""
        frame = sys._getframe(1)
        while frame is not None:
            if self.contains(frame.f_code.co_filename):
                return frame.f_code.co_filename, frame.f_lineno
            frame = frame.f_back
        return "", 0
