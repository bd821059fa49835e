"""Command-line tools, run as ``python -m greenmongo <tool>``: ``doctor`` (tools/doctor.py).

The top layer: tools use the driver's layers and nothing imports them.
"""
