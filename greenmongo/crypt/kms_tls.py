"""``kms_tls_options``: per-KMS-provider TLS settings (Client Side Encryption spec, "KMS TLS Options").

Only the CA file, the client certificate and its password may be set: the spec forbids options that
weaken verification, and an unknown option is an error rather than ignored.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from greenmongo.errors import ConfigurationError
from greenmongo.options.connection_settings import TlsSettings

_ALLOWED = {"tlsCAFile": "ca_file", "tlsCertificateKeyFile": "certificate_key_file",
            "tlsCertificateKeyFilePassword": "certificate_key_file_password"}
_INSECURE = ("tls", "ssl", "tlsInsecure", "tlsAllowInvalidCertificates", "tlsAllowInvalidHostnames",
             "tlsDisableOCSPEndpointCheck", "tlsDisableCertificateRevocationCheck")
#: Verified TLS with the system CA store: what a provider without options gets.
DEFAULT = TlsSettings(disable_ocsp_endpoint_check=True)


def parse_kms_tls_options(options: Optional[Mapping[str, Any]]) -> dict[str, TlsSettings]:
    """Provider name -> TlsSettings; ConfigurationError for an insecure or unknown option (never ignored)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"kms_tls_options must be a dict, not {type(options).__name__}")
    parsed: dict[str, TlsSettings] = {}
    for provider, opts in options.items():
        if not isinstance(opts, Mapping):
            raise TypeError(f"kms_tls_options[{provider!r}] must be a dict, not {type(opts).__name__}")
        fields: dict[str, Any] = {}
        for name, value in opts.items():
            if name in _INSECURE:
                raise ConfigurationError(f"Insecure TLS options prohibited: kms_tls_options[{provider!r}] "
                                         f"may not set {name}")
            if name not in _ALLOWED:
                raise ConfigurationError(f"kms_tls_options[{provider!r}]: unknown TLS option {name!r} "
                                         f"(allowed: {', '.join(_ALLOWED)})")
            if not isinstance(value, str):
                raise TypeError(f"kms_tls_options[{provider!r}][{name!r}] must be a str")
            fields[_ALLOWED[name]] = value
        parsed[provider] = TlsSettings(disable_ocsp_endpoint_check=True, **fields)
    return parsed
