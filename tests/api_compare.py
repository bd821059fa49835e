"""How a greenmongo callable's signature compares with PyMongo's: shared by the public-API tests of
``bson`` (tests/test_bson_public_api.py) and ``pymongo`` (tests/test_pymongo_public_api.py)."""

from __future__ import annotations

import inspect
from typing import Any, Container, Iterable, Iterator

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def generic(signature: inspect.Signature) -> bool:
    kinds = [p.kind for p in signature.parameters.values() if p.name not in ("self", "cls")]
    return bool(kinds) and all(kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
                               for kind in kinds)


def _default_text(value: Any) -> str:
    return repr(value).replace("greenmongo.bson.", "bson.")


def incompatibilities(theirs: inspect.Signature, mine: inspect.Signature) -> list[str]:
    """Why a call that binds to PyMongo's signature would not bind (or would bind differently) to ours."""
    problems = []
    t_params, m_params = list(theirs.parameters.values()), list(mine.parameters.values())
    m_by_name = {p.name: p for p in m_params}
    m_var_pos = any(p.kind is p.VAR_POSITIONAL for p in m_params)
    m_var_kw = any(p.kind is p.VAR_KEYWORD for p in m_params)
    m_positional = [p for p in m_params if p.kind in _POSITIONAL]
    for index, param in enumerate(t_params):
        if param.kind is param.VAR_POSITIONAL:
            if not m_var_pos:
                problems.append("no *args")
            continue
        if param.kind is param.VAR_KEYWORD:
            if not m_var_kw:
                problems.append("no **kwargs")
            continue
        if param.kind in _POSITIONAL:
            if index < len(m_positional):
                counterpart = m_positional[index]
                if index == 0 and param.name in ("self", "cls"):
                    continue
                if param.kind in _KEYWORD and counterpart.name != param.name:
                    problems.append(f"parameter {index} is {counterpart.name!r}, not {param.name!r}")
                    continue
            elif not m_var_pos:
                problems.append(f"no positional parameter {index} ({param.name})")
                continue
            else:
                counterpart = None
        else:
            counterpart = m_by_name.get(param.name)
            if counterpart is None or counterpart.kind not in _KEYWORD:
                if not m_var_kw:
                    problems.append(f"no keyword {param.name!r}")
                continue
        if counterpart is not None and param.default is not param.empty:
            if counterpart.default is counterpart.empty:
                problems.append(f"{param.name!r} has no default")
            elif _default_text(counterpart.default) != _default_text(param.default):
                problems.append(f"{param.name!r} defaults to {counterpart.default!r}, not {param.default!r}")
    t_names = {p.name for p in t_params}
    matched = {m_positional[i].name for i, p in enumerate(t_params) if p.kind in _POSITIONAL and i < len(m_positional)}
    for param in m_params:
        if param.default is param.empty and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD) \
                and param.name not in t_names | matched and param.name not in ("self", "cls"):
            problems.append(f"extra required parameter {param.name!r}")
    return problems


#: Members compared besides the public ones: construction and the call/index protocols.
_DUNDERS = ("__init__", "__new__", "__call__", "__getitem__")


def class_methods(name: str, theirs: type, mine: Any) -> Iterator[tuple[str, Any, Any]]:
    """``(Class.method, theirs, mine)`` for each public (or constructing) function a class defines."""
    for attr in sorted(vars(theirs)):
        if attr.startswith("_") and attr not in _DUNDERS:
            continue
        static = inspect.getattr_static(theirs, attr)
        if isinstance(static, (staticmethod, classmethod)) or inspect.isfunction(static):
            yield f"{name}.{attr}", getattr(theirs, attr), getattr(mine, attr, None)


def signature_problems(callables: Iterable[tuple[str, Any, Any]],
                       allowed: Container[str]) -> tuple[dict[str, list[str]], int]:
    """The callables whose signatures cannot bind PyMongo's calls (missing ones too), and how many were compared."""
    problems: dict[str, list[str]] = {}
    compared = 0
    for qualname, theirs, mine in callables:
        if mine is None:
            problems[qualname] = ["missing"]
            continue
        t_sig, m_sig = signature(theirs), signature(mine)
        if t_sig is None or m_sig is None or generic(t_sig):
            continue  # (*args, **kwargs) says nothing: PyMongo's __init__, compared on its own, does
        compared += 1
        found = incompatibilities(t_sig, m_sig)
        if found and qualname not in allowed:
            problems[qualname] = found
    return problems, compared
