"""runOnRequirements evaluated against the actual server; a skip names what was not met.

Pure apart from ``ServerInfo.parameters()``, which asks the server once (getParameter '*')
and is cached for the session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from spec.unified.context import ServerInfo
from spec.unified.matching import values_equal
from spec.unified.schema import parse_version
from spec.unified.outcomes import TestFileError

_KNOWN = frozenset({"minServerVersion", "maxServerVersion", "topologies", "serverless", "serverParameters",
                    "auth", "authMechanism", "csfle"})


def _version_text(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)


def unmet(requirement: Mapping[str, Any], server: ServerInfo, csfle_available: bool) -> list[str]:
    """Why one runOnRequirement object is not satisfied (empty: it is)."""
    unknown = set(requirement) - _KNOWN
    if unknown:
        raise TestFileError(f"unknown runOnRequirement keys {sorted(unknown)}")
    reasons = []
    version = server.version
    if "minServerVersion" in requirement:
        wanted = parse_version(requirement["minServerVersion"])
        if wanted is None:
            raise TestFileError(f"bad minServerVersion {requirement['minServerVersion']!r}")
        if version < wanted:
            reasons.append(f"minServerVersion {requirement['minServerVersion']} > server {_version_text(version)}")
    if "maxServerVersion" in requirement:
        wanted = parse_version(requirement["maxServerVersion"])
        if wanted is None:
            raise TestFileError(f"bad maxServerVersion {requirement['maxServerVersion']!r}")
        if version > wanted:
            reasons.append(f"maxServerVersion {requirement['maxServerVersion']} < server {_version_text(version)}")
    topologies = requirement.get("topologies")
    if topologies:
        accepted = set(topologies)
        if "sharded-replicaset" in accepted and server.topology == "sharded" and server.shards_are_replica_sets:
            accepted.add("sharded")
        if server.topology not in accepted:
            reasons.append(f"topologies {list(topologies)} exclude {server.topology}")
    serverless = requirement.get("serverless", "allow")
    if serverless == "require" and not server.serverless:
        reasons.append("serverless required")
    elif serverless == "forbid" and server.serverless:
        reasons.append("serverless forbidden")
    parameters = requirement.get("serverParameters")
    if parameters:
        actual = server.parameters()
        for name, wanted_value in parameters.items():
            if name not in actual:
                reasons.append(f"serverParameters: server has no {name}")
            elif not values_equal(wanted_value, actual[name]):
                reasons.append(f"serverParameters: {name}={actual[name]!r}, need {wanted_value!r}")
    if "auth" in requirement:
        if requirement["auth"] and not server.auth:
            reasons.append("auth required (the suite's connection has no credentials)")
        elif not requirement["auth"] and server.auth:
            reasons.append("auth must be disabled")
    mechanism = requirement.get("authMechanism")
    if mechanism:
        supported = [str(m).lower() for m in server.parameters().get("authenticationMechanisms", [])]
        if mechanism.lower() not in supported:
            reasons.append(f"authMechanism {mechanism} not in the server's {supported}")
    csfle = requirement.get("csfle")
    if csfle is not None and csfle is not False:
        if not csfle_available or version < (4, 2, 0):
            reasons.append("csfle required (libmongocrypt support is not available)")
    elif csfle is False and csfle_available and version >= (4, 2, 0):
        reasons.append("csfle must be unavailable")
    return reasons


def skip_reason(requirements: Optional[Sequence[Mapping[str, Any]]], server: ServerInfo,
                csfle_available: bool, where: str) -> Optional[str]:
    """None when one of the requirements holds (or there are none), else the reason to skip."""
    if not requirements:
        return None
    failures = []
    for requirement in requirements:
        reasons = unmet(requirement, server, csfle_available)
        if not reasons:
            return None
        failures.append("; ".join(reasons))
    return f"{where} runOnRequirements not met: " + " | ".join(failures)
