"""Build hook for the optional C accelerator; package metadata lives in pyproject.toml.

``greenmongo.bson._speedups`` is an optional extension: without a compiler (or if the build fails)
the install still succeeds and greenmongo uses its pure-Python BSON codec.
"""

from setuptools import Extension, setup

SPEEDUPS = Extension(
    "greenmongo.bson._speedups",
    sources=[
        "greenmongo/bson/_speedups.c",
        "greenmongo/bson/_speedups_decoder.c",
        "greenmongo/bson/_speedups_decode_api.c",
        "greenmongo/bson/_speedups_encoder.c",
    ],
    depends=["greenmongo/bson/_speedups.h"],
    optional=True,
)

setup(ext_modules=[SPEEDUPS])
