"""PyMongo's import path ``pymongo.auth_oidc``: the MONGODB-OIDC callback API.

Pass an ``OIDCCallback`` subclass instance as ``authMechanismProperties={"OIDC_CALLBACK": ...}`` (machine
flow) or ``"OIDC_HUMAN_CALLBACK"`` (human flow); the implementation is ``greenmongo.auth.oidc``.
"""

from greenmongo.auth import oidc as _oidc
from greenmongo.auth.oidc import OIDCCallback, OIDCCallbackContext, OIDCCallbackResult, OIDCIdPInfo

#: The callback API version passed in ``OIDCCallbackContext.version``.
CALLBACK_VERSION = _oidc.CALLBACK_VERSION
#: How long a machine callback may take, and a human one (a person is typing), in seconds.
MACHINE_CALLBACK_TIMEOUT_SECONDS = int(_oidc.MACHINE_CALLBACK_TIMEOUT)
HUMAN_CALLBACK_TIMEOUT_SECONDS = int(_oidc.HUMAN_CALLBACK_TIMEOUT)
#: The least time between two callback calls (the spec's throttle), in seconds.
TIME_BETWEEN_CALLS_SECONDS = _oidc.RETRY_PAUSE
#: Minutes before expiry at which a token counts as expired (defined by PyMongo, used by neither driver).
TOKEN_BUFFER_MINUTES = 5

__all__ = ["OIDCCallback", "OIDCCallbackContext", "OIDCCallbackResult", "OIDCIdPInfo"]
