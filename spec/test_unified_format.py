"""The unified test format's own tests: valid-pass must pass, valid-fail must fail, invalid must be rejected.

valid-pass and valid-fail run against a server through the selected driver
(``GREENMONGO_UNIFIED_DRIVER``, see spec/unified/drivers); both kinds of file
must validate against their schema (the runner checks before running).
invalid is pure schema validation, one item per file (each file is one thing
the schema must refuse; two of them have no test list at all).
"""

from __future__ import annotations

import pytest

from spec.support import file_params, load_json
from spec.unified.fixtures import run_case, unified_params, unified_servers  # noqa: F401 (fixture)
from spec.unified.outcomes import NotSupported
from spec.unified.runner import run_test
from spec.unified.schema import schema_errors

VALID_PASS = "unified-test-format/tests/valid-pass"
VALID_FAIL = "unified-test-format/tests/valid-fail"
INVALID = "unified-test-format/tests/invalid"


@pytest.mark.parametrize("case", unified_params(VALID_PASS))
def test_valid_pass(case, unified_servers):  # noqa: F811 (the imported fixture)
    run_case(unified_servers, case)


@pytest.mark.parametrize("case", unified_params(VALID_FAIL))
def test_valid_fail(case, unified_servers):  # noqa: F811 (the imported fixture)
    # A valid-fail file is schema-valid: it must fail at run time, not at validation.
    assert schema_errors(load_json(case.path)) == []
    context = unified_servers.context_for(case.suite)
    try:
        run_test(context, case.path, case.index)
    except NotSupported as exc:  # unmet runOnRequirements (csfle) or a feature we deliberately lack
        pytest.skip(str(exc))
    except Exception:
        return  # failed, as a valid-fail test must
    pytest.fail("the runner accepted a valid-fail test")


@pytest.mark.parametrize("path", file_params(INVALID))
def test_invalid_rejected(path):
    assert schema_errors(load_json(path)), "the schema accepted an invalid test file"
