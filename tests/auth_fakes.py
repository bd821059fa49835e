"""Fakes for the authentication tests: a credential stand-in, a scripted connection,
and a SCRAM server written from RFC 5802's equations (independent of the client code
under test except for SASLprep, which both sides must share).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections import namedtuple
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from greenmongo.auth.cache import AuthCache, AuthIO
from greenmongo.auth.saslprep import saslprep
from greenmongo.errors import OperationFailure

# The same field names as greenmongo.options.credentials.MongoCredential.
MongoCredential = namedtuple("MongoCredential",
                             "mechanism source username password mechanism_properties cache")


def credential(mechanism: Optional[str] = None, username: Optional[str] = None,
               password: Optional[str] = None, source: Optional[str] = "admin",
               properties: Optional[Mapping[str, Any]] = None,
               cache: Optional[AuthCache] = None, io: Optional[AuthIO] = None) -> MongoCredential:
    return MongoCredential(mechanism, source, username, password, dict(properties or {}),
                           cache if cache is not None else AuthCache(io))


class FakeConn:
    """``command`` hands every command to ``handler`` and raises on ``ok: 0`` like the real one."""

    def __init__(self, handler: Callable[[str, Mapping[str, Any]], Dict[str, Any]],
                 hello: Optional[Dict[str, Any]] = None,
                 address: Tuple[str, int] = ("localhost", 27017)) -> None:
        self.handler = handler
        self.hello = hello if hello is not None else {"isWritablePrimary": True, "maxWireVersion": 21, "ok": 1}
        self.address = address
        self.sent: List[Tuple[str, Dict[str, Any]]] = []

    def command(self, dbname: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        self.sent.append((dbname, dict(spec)))
        reply = self.handler(dbname, spec)
        if reply.get("ok", 1) != 1:
            raise OperationFailure(reply.get("errmsg", "command failed"), reply.get("code"), reply)
        return reply

    def command_names(self) -> List[str]:
        return [next(iter(spec)) for _, spec in self.sent]


def auth_failed() -> Dict[str, Any]:
    return {"ok": 0, "errmsg": "Authentication failed.", "code": 18, "codeName": "AuthenticationFailed"}


_HASHES = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256"}


class FakeScramServer:
    """Server side of SCRAM over saslStart/saslContinue, for users it was given.

    ``skip_empty_exchange=False`` behaves like a pre-4.4 server (one more empty
    round trip). ``tamper_signature`` corrupts the server's proof;
    ``tamper_nonce`` returns a nonce that does not extend the client's.
    """

    def __init__(self, users: Mapping[Tuple[str, str], str], mechanisms: Tuple[str, ...] = ("SCRAM-SHA-256",),
                 iterations: int = 4096, skip_empty_exchange: bool = True) -> None:
        self.iterations = iterations
        self.mechanisms = mechanisms
        self.skip_empty_exchange = skip_empty_exchange
        self.tamper_signature = False
        self.tamper_nonce = False
        self.salt = os.urandom(16)
        self.keys: Dict[Tuple[str, str, str], Tuple[bytes, bytes]] = {}
        for (source, user), password in users.items():
            for mechanism in mechanisms:
                self.keys[(source, user, mechanism)] = self._derive(mechanism, user, password)
        self.conversations: Dict[int, Dict[str, Any]] = {}
        self.started: List[Dict[str, Any]] = []

    def _derive(self, mechanism: str, user: str, password: str) -> Tuple[bytes, bytes]:
        name = _HASHES[mechanism]
        if mechanism == "SCRAM-SHA-1":
            secret = hashlib.md5(f"{user}:mongo:{password}".encode()).hexdigest()
        else:
            secret = saslprep(password)
        salted = hashlib.pbkdf2_hmac(name, secret.encode(), self.salt, self.iterations)
        client_key = hmac.new(salted, b"Client Key", name).digest()
        return hashlib.new(name, client_key).digest(), hmac.new(salted, b"Server Key", name).digest()

    # -- the commands
    def __call__(self, dbname: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        if "saslStart" in spec:
            return self.sasl_start(dbname, spec)
        if "saslContinue" in spec:
            return self.sasl_continue(spec)
        if "hello" in spec:
            return self.hello(spec)
        raise AssertionError(f"unexpected command {spec!r}")

    def hello(self, spec: Mapping[str, Any]) -> Dict[str, Any]:
        reply: Dict[str, Any] = {"isWritablePrimary": True, "maxWireVersion": 21, "ok": 1}
        if "saslSupportedMechs" in spec:
            source, _, user = spec["saslSupportedMechs"].partition(".")
            reply["saslSupportedMechs"] = [m for m in self.mechanisms if (source, user, m) in self.keys]
        speculative = spec.get("speculativeAuthenticate")
        if speculative is not None:
            answer = self.sasl_start(speculative["db"], speculative)
            if answer.get("ok") == 1:
                answer.pop("ok")
                reply["speculativeAuthenticate"] = answer
        return reply

    def sasl_start(self, dbname: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        self.started.append(dict(spec))
        mechanism = spec["mechanism"]
        client_first = bytes(spec["payload"]).decode()
        assert client_first.startswith("n,,"), client_first
        bare = client_first[3:]
        fields = dict(item.split("=", 1) for item in bare.split(","))
        user = fields["n"].replace("=2C", ",").replace("=3D", "=")
        if (dbname, user, mechanism) not in self.keys:
            return auth_failed()
        nonce = fields["r"] + base64.b64encode(os.urandom(18)).decode()
        if self.tamper_nonce:
            nonce = "X" + nonce
        server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        conversation_id = len(self.conversations) + 1
        self.conversations[conversation_id] = {
            "key": (dbname, user, mechanism), "bare": bare, "server_first": server_first, "nonce": nonce,
            "skip": bool((spec.get("options") or {}).get("skipEmptyExchange")) and self.skip_empty_exchange,
            "step": 1,
        }
        return {"conversationId": conversation_id, "done": False, "payload": server_first.encode(), "ok": 1}

    def sasl_continue(self, spec: Mapping[str, Any]) -> Dict[str, Any]:
        state = self.conversations[spec["conversationId"]]
        if state["step"] == 2:
            assert bytes(spec["payload"]) == b""
            return {"conversationId": spec["conversationId"], "done": True, "payload": b"", "ok": 1}
        client_final = bytes(spec["payload"]).decode()
        without_proof, _, proof = client_final.rpartition(",p=")
        fields = dict(item.split("=", 1) for item in without_proof.split(","))
        if fields.get("c") != "biws" or fields.get("r") != state["nonce"]:
            return auth_failed()
        dbname, user, mechanism = state["key"]
        stored_key, server_key = self.keys[state["key"]]
        name = _HASHES[mechanism]
        auth_message = ",".join((state["bare"], state["server_first"], without_proof)).encode()
        client_signature = hmac.new(stored_key, auth_message, name).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), client_signature, strict=False))
        if hashlib.new(name, client_key).digest() != stored_key:
            return auth_failed()
        signature = hmac.new(server_key, auth_message, name).digest()
        if self.tamper_signature:
            signature = bytes([signature[0] ^ 1]) + signature[1:]
        state["step"] = 2
        return {"conversationId": spec["conversationId"], "done": state["skip"],
                "payload": b"v=" + base64.b64encode(signature), "ok": 1}
