"""pytest plugin loaded (``-p mongoengine_compat``) into both sides of the MongoEngine compat run.

It runs before pytest collects anything, so on the greenmongo side ``install_as_pymongo()`` is in
place before mongoengine (or a test module) imports ``pymongo``, ``bson`` or ``gridfs``. It is
driven by environment variables that ``run_mongoengine.py`` sets:

- ``COMPAT_DRIVER``: ``pymongo`` or ``greenmongo`` (which side this process is);
- ``COMPAT_PORT``: the SecantusDB port, when it is not MongoDB's default 27017 that mongoengine's
  tests assume (then ``mongoengine.connection.DEFAULT_PORT`` is pointed at it; tests that spell
  ``localhost:27017`` out still go to 27017);
- ``COMPAT_GEVENT_PATCH=1``: ``gevent.monkey.patch_all()`` first (greenmongo side only);
- ``COMPAT_EXTRA_PLUGIN``: a Python file run after the above, for local diagnosis only (shims).
"""

from __future__ import annotations

import importlib.util
import os
import runpy

DRIVER = os.environ.get("COMPAT_DRIVER", "")

if DRIVER == "greenmongo":
    if os.environ.get("COMPAT_GEVENT_PATCH") == "1":
        from gevent import monkey

        monkey.patch_all()
    # The greenmongo venv must not have PyMongo: a test passing there must be greenmongo's doing.
    # find_spec before install: afterwards the finder answers for "pymongo" itself.
    for _name in ("pymongo", "bson", "gridfs"):
        if importlib.util.find_spec(_name) is not None:
            raise RuntimeError(f"the greenmongo side can import the real {_name!r}: it must not be installed")
    import greenmongo

    greenmongo.install_as_pymongo()
elif DRIVER != "pymongo":
    raise RuntimeError(f"COMPAT_DRIVER must be 'pymongo' or 'greenmongo', not {DRIVER!r}")

if os.environ.get("COMPAT_EXTRA_PLUGIN"):
    runpy.run_path(os.environ["COMPAT_EXTRA_PLUGIN"], run_name="compat_extra_plugin")

_PORT = int(os.environ.get("COMPAT_PORT") or 27017)


def pytest_configure(config) -> None:  # noqa: ANN001 - pytest hook
    if _PORT != 27017:
        try:
            import mongoengine.connection
        except ImportError:
            return  # reported by collection; nothing to point at
        mongoengine.connection.DEFAULT_PORT = _PORT


def pytest_report_header(config) -> list[str]:  # noqa: ANN001 - pytest hook
    import pymongo

    lines = [f"compat driver: {DRIVER}; import pymongo -> version {pymongo.version} from "
             f"{getattr(pymongo, '__file__', None) or 'greenmongo (install_as_pymongo facade)'}"]
    if DRIVER == "greenmongo":
        import greenmongo

        lines.append(f"greenmongo {greenmongo.version} from {os.path.dirname(greenmongo.__file__)}")
    lines.append(f"server port: {_PORT}")
    return lines
