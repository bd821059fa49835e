"""Stand-in for MongoEngine's ``tests/utils.py`` (absent from its sdist).

Only what the sdist's test modules import: ``MongoDBTestCase``, a ``unittest.TestCase`` whose
class gets a fresh connection to the test database, dropped before and after the class runs.
"""

import unittest

from mongoengine import connect
from mongoengine.connection import disconnect_all, get_db

MONGO_TEST_DB = "mongoenginetest"


class MongoDBTestCase(unittest.TestCase):
    """Each test class starts from an empty ``mongoenginetest`` database and leaves none behind."""

    @classmethod
    def setUpClass(cls):
        disconnect_all()
        cls._connection = connect(db=MONGO_TEST_DB)
        cls._connection.drop_database(MONGO_TEST_DB)
        cls.db = get_db()

    @classmethod
    def tearDownClass(cls):
        cls._connection.drop_database(MONGO_TEST_DB)
        disconnect_all()
