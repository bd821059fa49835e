"""Client configuration: connection strings, options, concerns, read preferences, credentials.

Pure: nothing here opens a socket or imports gevent, except that resolving a
``mongodb+srv`` URI calls ``greenmongo.net.dns`` (or the resolver passed in).
"""

from greenmongo.options.client_options import ClientOptions
from greenmongo.options.credentials import MechanismProperties, MongoCredential, build_credentials
from greenmongo.options.read_concern import DEFAULT_READ_CONCERN, ReadConcern
from greenmongo.options.read_preferences import (
    Nearest,
    Primary,
    PrimaryPreferred,
    ReadPreference,
    Secondary,
    SecondaryPreferred,
    ServerMode,
    make_read_preference,
    read_pref_mode_from_name,
)
from greenmongo.options.server_api import ServerApi, ServerApiVersion
from greenmongo.options.uri import ParsedUri, parse_uri, split_uri
from greenmongo.options.write_concern import DEFAULT_WRITE_CONCERN, WriteConcern

__all__ = [
    "ClientOptions", "DEFAULT_READ_CONCERN", "DEFAULT_WRITE_CONCERN", "MechanismProperties", "MongoCredential",
    "Nearest", "ParsedUri", "Primary", "PrimaryPreferred", "ReadConcern", "ReadPreference", "Secondary",
    "SecondaryPreferred", "ServerApi", "ServerApiVersion", "ServerMode", "WriteConcern", "build_credentials",
    "make_read_preference", "parse_uri", "read_pref_mode_from_name", "split_uri",
]
