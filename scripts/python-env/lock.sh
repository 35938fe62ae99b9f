#!/usr/bin/env bash
# Regenerates runtime.lock and test.lock (pinned versions with hashes) from
# runtime.in and test.in with pip-tools, for the interpreter the worker embeds.
# Takes several minutes: pip-tools downloads every wheel to hash it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
/usr/bin/python3 -m venv "$tools"
"$tools/bin/pip" install --quiet pip-tools
for name in runtime test; do
  (cd "$here" && "$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe \
    --strip-extras --no-header --no-emit-find-links --output-file "$name.lock" "$name.in")
done
