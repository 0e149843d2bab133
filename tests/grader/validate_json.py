#!/usr/bin/env python3
"""validate_json.py SCHEMA FILE... - each FILE against a JSON Schema (draft 7), with the
validator Debian ships (python3-jsonschema). One line per file: "valid FILE" or
"invalid FILE: <path>: <message>" for its first error; exit 0 only when all are valid,
2 when the validator or a file cannot be read."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("validate_json.py: python3-jsonschema is needed (apt-get install python3-jsonschema, "
          "or scripts/install-deps.sh --tests)")
    sys.exit(2)

if len(sys.argv) < 3:
    print("usage: validate_json.py SCHEMA FILE...")
    sys.exit(2)
try:
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
except (OSError, ValueError, jsonschema.SchemaError) as e:
    print(f"validate_json.py: the schema {sys.argv[1]}: {e}")
    sys.exit(2)
validator = jsonschema.Draft7Validator(schema)
bad = 0
for path in sys.argv[2:]:
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"invalid {path}: not JSON: {e}")
        bad = 1
        continue
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(top)"
        print(f"invalid {path}: {where}: {errors[0].message}")
        bad = 1
    else:
        print(f"valid {path}")
sys.exit(bad)
