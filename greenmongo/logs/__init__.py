"""The standardized log messages (Logging spec) and the loggers of each component.

``messages`` builds the structured messages, ``command``/``pool``/``topology`` emit them for command
monitoring, CMAP and SDAM/server selection. Pure apart from the ``logging`` module.
"""
