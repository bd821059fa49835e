"""uri-options/tests: every option's parsing, validation, warnings and conflicts.

``mongodb+srv`` cases resolve against the loopback DNS server (tests/servers/dns.py).
"""

from __future__ import annotations

import pytest

from spec.support import params
from spec.test_connection_string import cases_in, check_case, loopback_resolver, resolver_for  # noqa: F401

#: The URI Options spec marks serverSelectionTryOnce "required for single-threaded drivers" only,
#: and the Server Selection spec says multi-threaded/asynchronous drivers MUST NOT provide it.
SINGLE_THREADED_ONLY = (
    "serverSelectionTryOnce is for single-threaded drivers only; greenmongo monitors servers in "
    "background greenlets, and the Server Selection spec forbids the mode for such drivers")


@pytest.mark.parametrize("case", params("uri-options/tests", cases_in))
def test_uri_options(case, request):
    if "serverSelectionTryOnce" in case["uri"]:
        pytest.skip(SINGLE_THREADED_ONLY)
    check_case(case, resolver_for(case, request))
