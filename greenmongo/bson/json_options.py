"""JSONOptions: how Extended JSON is written and read (mode, dates, UUIDs, plus CodecOptions)."""

from __future__ import annotations

import datetime
import re
from typing import Any, Dict, Optional, Tuple

from greenmongo.bson.codec_options import CodecOptions

_UTC = datetime.timezone.utc
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_ORDINAL = _EPOCH_NAIVE.toordinal()
_MIN_DATETIME_MS = -62135596800000   # 0001-01-01T00:00:00Z
_MAX_DATETIME_MS = 253402300799999   # 9999-12-31T23:59:59.999Z
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_RE_TYPE = type(re.compile(""))


class JSONMode:
    """Which Extended JSON format ``dumps`` writes (and whether ``loads`` accepts legacy forms)."""

    LEGACY = 0
    """PyMongo's pre-spec format; ``loads`` also accepts legacy input forms in this mode."""
    RELAXED = 1
    """Relaxed Extended JSON v2: readable, numbers as JSON numbers. The default."""
    CANONICAL = 2
    """Canonical Extended JSON v2: every BSON type preserved."""


class DatetimeRepresentation:
    """How ``dumps`` writes datetimes."""

    LEGACY = 0
    """``{"$date": <ms since the epoch>}``."""
    NUMBERLONG = 1
    """``{"$date": {"$numberLong": "<ms since the epoch>"}}``."""
    ISO8601 = 2
    """``{"$date": "<ISO-8601, UTC>"}`` for years 1970-9999, NUMBERLONG otherwise."""


_JSON_FIELDS = ("strict_number_long", "datetime_representation", "strict_uuid", "json_mode")


class JSONOptions(CodecOptions):
    """Options for ``dumps``/``loads``: the output mode plus the CodecOptions fields.

    ``strict_number_long``: write Int64 as ``$numberLong`` (forced True in
    CANONICAL, False in RELAXED). ``datetime_representation``: see
    :class:`DatetimeRepresentation` (forced NUMBERLONG in CANONICAL, ISO8601 in
    RELAXED). ``strict_uuid``: write a native ``uuid.UUID`` as ``$binary`` using
    ``uuid_representation`` (default True, False in LEGACY); False writes ``{"$uuid": ...}``.
    ``document_class``, ``tz_aware``, ``tzinfo``, ``uuid_representation`` and
    ``datetime_conversion`` shape what ``loads`` returns, as they do for BSON.
    """

    _json_arguments: Tuple[Optional[bool], Optional[int], Optional[bool], int]
    json_mode: int
    strict_number_long: bool
    datetime_representation: int
    strict_uuid: bool

    def __new__(cls, strict_number_long: Optional[bool] = None, datetime_representation: Optional[int] = None,
                strict_uuid: Optional[bool] = None, json_mode: int = JSONMode.RELAXED,
                *args: Any, **kwargs: Any) -> "JSONOptions":
        if json_mode not in (JSONMode.LEGACY, JSONMode.RELAXED, JSONMode.CANONICAL):
            raise ValueError(f"json_mode must be JSONMode.LEGACY, RELAXED or CANONICAL, not {json_mode!r}")
        if datetime_representation not in (None, DatetimeRepresentation.LEGACY,
                                           DatetimeRepresentation.NUMBERLONG, DatetimeRepresentation.ISO8601):
            raise ValueError("datetime_representation must be one of LEGACY, NUMBERLONG or ISO8601 "
                             "from DatetimeRepresentation")
        if kwargs.get("tz_aware") and "tzinfo" not in kwargs:
            kwargs["tzinfo"] = _UTC  # PyMongo's JSONOptions names the zone tz-aware output uses
        self = super().__new__(cls, *args, **kwargs)
        self._json_arguments = (strict_number_long, datetime_representation, strict_uuid, json_mode)
        self.json_mode = json_mode
        if json_mode == JSONMode.CANONICAL:
            if strict_number_long is False:
                raise ValueError("strict_number_long cannot be False with JSONMode.CANONICAL")
            if datetime_representation not in (None, DatetimeRepresentation.NUMBERLONG):
                raise ValueError("datetime_representation must be NUMBERLONG with JSONMode.CANONICAL")
            if strict_uuid is False:
                raise ValueError("strict_uuid cannot be False with JSONMode.CANONICAL")
            self.strict_number_long = True
            self.datetime_representation = DatetimeRepresentation.NUMBERLONG
            self.strict_uuid = True
        elif json_mode == JSONMode.RELAXED:
            if strict_number_long:
                raise ValueError("strict_number_long cannot be True with JSONMode.RELAXED")
            if datetime_representation not in (None, DatetimeRepresentation.ISO8601):
                raise ValueError("datetime_representation must be ISO8601 with JSONMode.RELAXED")
            self.strict_number_long = False
            self.datetime_representation = DatetimeRepresentation.ISO8601
            self.strict_uuid = True if strict_uuid is None else bool(strict_uuid)
        else:
            self.strict_number_long = bool(strict_number_long)
            self.datetime_representation = (DatetimeRepresentation.LEGACY if datetime_representation is None
                                            else datetime_representation)
            self.strict_uuid = bool(strict_uuid)  # LEGACY writes {"$uuid": ...} unless asked (PyMongo's default)
        return self

    def _all_arguments(self) -> Dict[str, Any]:
        arguments = self._asdict()
        arguments.update(zip(_JSON_FIELDS, self._json_arguments))
        return arguments

    def with_options(self, **kwargs: Any) -> "JSONOptions":
        """A copy with some options changed; derived settings follow a changed ``json_mode``."""
        arguments = self._all_arguments()
        arguments.update(kwargs)
        return JSONOptions(**arguments)

    def __reduce__(self) -> Any:
        return (_rebuild_json_options, (self._all_arguments(),))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, JSONOptions):
            return tuple(self) == tuple(other) and self._json_values() == other._json_values()
        return NotImplemented

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash((tuple(self), self._json_values()))

    def _json_values(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _JSON_FIELDS)

    def __repr__(self) -> str:
        return (f"JSONOptions(strict_number_long={self.strict_number_long!r}, "
                f"datetime_representation={self.datetime_representation!r}, "
                f"strict_uuid={self.strict_uuid!r}, json_mode={self.json_mode!r}, {self._arguments_repr()})")


def _rebuild_json_options(arguments: Dict[str, Any]) -> JSONOptions:
    return JSONOptions(**arguments)


LEGACY_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.LEGACY)
RELAXED_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.RELAXED)
CANONICAL_JSON_OPTIONS = JSONOptions(json_mode=JSONMode.CANONICAL)
DEFAULT_JSON_OPTIONS = RELAXED_JSON_OPTIONS
