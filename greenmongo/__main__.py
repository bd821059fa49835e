"""``python -m greenmongo <tool> ...``: the command-line tools of ``greenmongo.tools``."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

_USAGE = "usage: python -m greenmongo doctor URI [--json] [--dns-server IP[:PORT]] [--timeout S] [--rtt-samples N]\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "doctor":
        from greenmongo.tools.doctor import main as doctor

        return doctor(args[1:])
    sys.stderr.write(_USAGE)
    return 0 if args[:1] in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main())
