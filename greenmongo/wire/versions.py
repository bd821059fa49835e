"""Wire versions: the range this driver speaks and the server releases whose features it checks.

Every comparison against a server's ``maxWireVersion`` names one of these, so "which release
introduced this" has one answer in the code base.
"""

from __future__ import annotations

#: The range this driver speaks (MongoDB 4.2 .. newer than 8.x).
CLIENT_MIN_WIRE_VERSION = 8
CLIENT_MAX_WIRE_VERSION = 29
#: The MongoDB release that introduced CLIENT_MIN_WIRE_VERSION, for error messages.
CLIENT_MIN_SERVER_VERSION = "4.2"

WIRE_3_4 = 5  # maxStalenessSeconds
WIRE_3_6 = 6  # OP_MSG
WIRE_4_0 = 7  # startAtOperationTime
WIRE_4_2 = 8  # state-change errors stop clearing the pool; hint on update
WIRE_4_4 = 9  # getMore comment, ResumableChangeStreamError label
WIRE_5_0 = 13  # $out/$merge on secondaries
WIRE_6_0 = 17  # electionId compared before setVersion
WIRE_7_0 = 21
WIRE_8_0 = 25  # bulkWrite
WIRE_8_2 = 27  # rawData

OP_MSG_MIN_WIRE_VERSION = WIRE_3_6
MAX_STALENESS_MIN_WIRE_VERSION = WIRE_3_4
