"""Stand-in for MongoEngine's ``tests/__init__.py`` (absent from its sdist): the paths its tests read."""

import os

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT_DIR = os.path.dirname(TESTS_DIR)
DOCS_DIR = os.path.join(ROOT_DIR, "docs")
