"""Read-only option mappings: case-insensitive keys, and secrets kept out of reprs.

Connection string keys are case-insensitive (Connection String spec), so every
mapping the options layer hands out looks keys up by their lower-cased form
while remembering the canonical spelling for iteration and display.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional

#: Shown in place of any secret value.
REDACTED = "<redacted>"


class OptionsMapping(Mapping[str, Any]):
    """An immutable mapping of canonical option names to values.

    ``resolve`` turns a user-supplied key into the canonical spelling (it also
    resolves aliases such as ``ssl`` -> ``tls``); unknown keys fall back to
    their lower-cased form. ``secret`` names the keys whose values never
    appear in ``repr``.
    """

    __slots__ = ("_data", "_resolve", "_secret")

    def __init__(
        self,
        items: Optional[Mapping[str, Any]] = None,
        resolve: Optional[Callable[[str], str]] = None,
        secret: Callable[[str, Any], Any] = lambda key, value: value,
    ) -> None:
        self._resolve = resolve or (lambda key: key)
        self._secret = secret
        self._data: dict[str, tuple[str, Any]] = {}
        for key, value in (items or {}).items():
            name = self._resolve(key)
            self._data[name.lower()] = (name, value)

    def __getitem__(self, key: str) -> Any:
        return self._data[self._resolve(key).lower()][1]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._resolve(key).lower() in self._data

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == {k: v for k, v in other.items()}
        return NotImplemented

    def __hash__(self) -> int:  # pragma: no cover - mappings of lists are not hashable anyway
        raise TypeError("OptionsMapping is not hashable")

    def to_dict(self) -> dict[str, Any]:
        """A plain dict with canonical keys (secrets included: for the driver's own use)."""
        return {name: value for name, value in self._data.values()}

    def __repr__(self) -> str:
        shown = {name: self._secret(name, value) for name, value in self._data.values()}
        return f"{type(self).__name__}({shown!r})"
