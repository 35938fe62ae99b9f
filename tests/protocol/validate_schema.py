#!/usr/bin/env python3
"""Validates JSON documents against their definition in protocol/schema/wavecast.schema.json.

    validate_schema.py SCHEMA DIR                   every DIR/<Definition>.<case>.json
    validate_schema.py SCHEMA DEFINITION FILE...    each FILE against DEFINITION

Fails (exit 1) on the first folder without documents, an unknown definition, or a document
that does not validate, printing each error's path in the document.
"""
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:  # a missing validator fails the test, saying how to get it
    sys.exit("validate_schema.py needs Python's jsonschema: apt install python3-jsonschema "
             "(scripts/setup.sh test installs it)")


def validator(schema, definition):
    if definition not in schema["definitions"]:
        sys.exit(f"no definition {definition!r} in the schema")
    root = {"$ref": f"#/definitions/{definition}", "definitions": schema["definitions"]}
    return jsonschema.Draft7Validator(root)


def check(schema, definition, path):
    errors = sorted(validator(schema, definition).iter_errors(json.loads(path.read_text())),
                    key=lambda e: list(e.absolute_path))
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        print(f"{path.name}: {definition}: at {where}: {error.message}")
    return not errors


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    schema = json.loads(pathlib.Path(argv[1]).read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    if len(argv) == 3:
        files = sorted(pathlib.Path(argv[2]).glob("*.json"))
        if not files:
            sys.exit(f"no documents in {argv[2]}")
        cases = [(f.name.split(".")[0], f) for f in files]
    else:
        cases = [(argv[2], pathlib.Path(f)) for f in argv[3:]]
    failed = [path for definition, path in cases if not check(schema, definition, path)]
    print(f"{len(cases) - len(failed)} of {len(cases)} documents match the schema")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
