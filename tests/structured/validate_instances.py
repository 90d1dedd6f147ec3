#!/usr/bin/env python3
"""Validates generated JSON against its schema with an independent validator
(python3-jsonschema, formats checked): reads JSON lines {"schema", "text"},
prints one JSON line {"checked", "invalid": [...]}. Used by the server tests."""
import json
import sys

from jsonschema import FormatChecker, validators

checked, invalid = 0, []
for line in sys.stdin:
    case = json.loads(line)
    checked += 1
    try:
        value = json.loads(case["text"])
    except ValueError as e:
        invalid.append({"text": case["text"][:200], "why": "not JSON: %s" % e})
        continue
    cls = validators.validator_for(case["schema"])
    errors = list(cls(case["schema"], format_checker=FormatChecker()).iter_errors(value))
    if errors:
        invalid.append({"text": case["text"][:200], "why": errors[0].message[:200]})
print(json.dumps({"checked": checked, "invalid": invalid}))
