"""PyMongo's run of the fault workload (tests/fault_workload.py), in a monkey-patched process of its own:
``python -m tests.fault_peer HOST PORT DB SEED`` prints the run's results as JSON on its last line."""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import pymongo  # noqa: E402

from tests import fault_workload  # noqa: E402


def main(host: str, port: str, db_name: str, seed: str) -> None:
    run = fault_workload.FaultRun(pymongo, (host, int(port)), db_name, int(seed))
    try:
        run.workload()
        run.after_faults()
    finally:
        run.close()
        run.stop_proxy()
    print(json.dumps(run.results()))


if __name__ == "__main__":
    main(*sys.argv[1:5])
