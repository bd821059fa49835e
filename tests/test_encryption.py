"""Client-side field level encryption against SecantusDB with the local KMS provider.

Explicit encryption of every BSON type the spec's corpus covers (deterministic ciphertexts must equal the
corpus's), Binary subtype 6, key management, automatic decryption without mongocryptd
(``bypass_auto_encryption``), and the errors for what this machine cannot run (mongocryptd, crypt_shared).
"""

from __future__ import annotations

import base64
import os
import pathlib
import subprocess
import sys
import uuid
from typing import Any

import pytest

from greenmongo import MongoClient, monitoring
from greenmongo.bson import STANDARD, Binary, CodecOptions, json_util
from greenmongo.bson.json_options import JSONOptions
from greenmongo.encryption import Algorithm, ClientEncryption, QueryType
from greenmongo.encryption_options import AutoEncryptionOpts, RangeOpts
from greenmongo.errors import ConfigurationError, EncryptedCollectionError, EncryptionError, InvalidOperation
from spec.unified.encryption import LOCAL_MASTER_KEY

SPEC_DIR = pathlib.Path(os.environ.get("GREENMONGO_SPEC_DIR", pathlib.Path(__file__).parents[2] / "shared"
                                       / "specifications")) / "client-side-encryption"
#: The spec's local master key (client-side-encryption.md, "kmsProviders").
LOCAL_KEY = LOCAL_MASTER_KEY
LOCAL = {"local": {"key": LOCAL_KEY}}
OPTS = CodecOptions(uuid_representation=STANDARD)
DET = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RAND = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random
_JSON = JSONOptions()  # subtype 4 stays Binary, as the key documents need


def corpus_file(name: str) -> Any:
    path = SPEC_DIR / "corpus" / name
    if not path.exists():
        pytest.skip(f"spec data missing: {path}")
    return json_util.loads(path.read_text(), json_options=_JSON)


@pytest.fixture
def client(server_uri):
    client = MongoClient(server_uri)
    client.keyvault.datakeys.drop()
    client.db.coll.drop()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def ce(client):
    with ClientEncryption(LOCAL, "keyvault.datakeys", client, OPTS) as ce:
        yield ce


# -- without pymongocrypt ------------------------------------------------------------------------------

def _run(code: str) -> subprocess.CompletedProcess:
    root = pathlib.Path(__file__).parents[1]
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)


def test_without_pymongocrypt_asking_for_encryption_names_the_extra() -> None:
    result = _run(
        "import sys; sys.modules['pymongocrypt'] = None\n"
        "from greenmongo.errors import ConfigurationError\n"
        "from greenmongo.encryption_options import AutoEncryptionOpts\n"
        "from greenmongo.encryption import ClientEncryption\n"
        "import greenmongo\n"
        "for make in (lambda: AutoEncryptionOpts({'local': {'key': b'k' * 96}}, 'k.v'),\n"
        "             lambda: ClientEncryption({'local': {'key': b'k' * 96}}, 'k.v',"
        " greenmongo.MongoClient(connect=False), greenmongo.bson.CodecOptions())):\n"
        "    try:\n"
        "        make()\n"
        "    except ConfigurationError as exc:\n"
        "        print('ConfigurationError', exc)\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("ConfigurationError") and "greenmongo[encryption]" in line for line in lines)


def test_encryption_never_imports_pymongo_or_bson(server_uri) -> None:
    result = _run(
        "import os, sys\n"
        "from greenmongo import MongoClient\n"
        "from greenmongo.bson import CodecOptions, STANDARD\n"
        "from greenmongo.encryption import ClientEncryption, Algorithm\n"
        "from greenmongo.encryption_options import AutoEncryptionOpts\n"
        f"c = MongoClient({server_uri!r})\n"
        "c.keyvault.datakeys_imports.drop()\n"
        "with ClientEncryption({'local': {'key': os.urandom(96)}}, 'keyvault.datakeys_imports', c,"
        " CodecOptions(uuid_representation=STANDARD)) as ce:\n"
        "    key = ce.create_data_key('local')\n"
        "    assert ce.decrypt(ce.encrypt('x', Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random, key_id=key)) == 'x'\n"
        f"a = MongoClient({server_uri!r}, auto_encryption_opts=AutoEncryptionOpts("
        "{'local': {'key': os.urandom(96)}}, 'keyvault.datakeys_imports', bypass_auto_encryption=True))\n"
        "a.db.imports.find_one(); a.close(); c.close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('bson', 'pymongo', 'gridfs')))\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- key management --------------------------------------------------------------------------------------

def test_data_keys_are_created_found_renamed_rewrapped_and_deleted(ce, client) -> None:
    key_id = ce.create_data_key("local", key_alt_names=["alpha"])
    assert isinstance(key_id, Binary) and key_id.subtype == 4
    document = ce.get_key(key_id)
    assert document["_id"] == key_id and dict(document["masterKey"]) == {"provider": "local"}
    assert list(document["keyAltNames"]) == ["alpha"]
    assert [key["_id"] for key in ce.get_keys()] == [key_id]
    assert ce.get_key_by_alt_name("alpha")["_id"] == key_id
    assert ce.get_key_by_alt_name("beta") is None
    before = ce.add_key_alt_name(key_id, "beta")
    assert list(before["keyAltNames"]) == ["alpha"]
    assert sorted(ce.get_key(key_id)["keyAltNames"]) == ["alpha", "beta"]
    assert list(ce.remove_key_alt_name(key_id, "alpha")["keyAltNames"]) == ["alpha", "beta"]
    ce.remove_key_alt_name(key_id, "beta")
    assert "keyAltNames" not in ce.get_key(key_id)  # the last name removes the field

    ciphertext = ce.encrypt("payload", DET, key_id=key_id)
    material = ce.get_key(key_id)["keyMaterial"]
    result = ce.rewrap_many_data_key({})
    assert result.bulk_write_result.modified_count == 1
    assert ce.get_key(key_id)["keyMaterial"] != material
    assert ce.decrypt(ciphertext) == "payload"
    assert ce.rewrap_many_data_key({"_id": Binary(b"\x00" * 16, 4)}).bulk_write_result is None
    with pytest.raises(ConfigurationError, match="provider"):
        ce.rewrap_many_data_key({}, master_key={"key": "x"})

    assert ce.delete_key(key_id).deleted_count == 1
    assert ce.get_key(key_id) is None
    # (``ce`` may still decrypt from libmongocrypt's key cache; a new ClientEncryption must read the vault)
    with ClientEncryption(LOCAL, "keyvault.datakeys", client, OPTS) as fresh:
        with pytest.raises(EncryptionError, match="not all keys requested were satisfied"):
            fresh.decrypt(ciphertext)


def test_key_alt_names_must_be_unique_with_the_spec_index(ce, client) -> None:
    client.keyvault.datakeys.create_index("keyAltNames", unique=True,
                                          partialFilterExpression={"keyAltNames": {"$exists": True}})
    ce.create_data_key("local", key_alt_names=["dup"])
    with pytest.raises(EncryptionError, match="E11000"):
        ce.create_data_key("local", key_alt_names=["dup"])


def test_custom_key_material_prose(ce, client) -> None:
    """Prose test 1: a key made from given material, re-inserted under the all-zero UUID, encrypts "test"
    deterministically to the spec's ciphertext."""
    material = base64.b64decode("xPTAjBRG5JiPm+d3fj6XLi2q5DMXUS/f1f+SMAlhhwkhDRL0kr8r9GDLIGTAGlvC+HVjSIgdL+RKwZCvpXSy"
                                "xTICWSXTUYsWYPyu3IoHbuBZdmw2faM3WhcRIgbMReU5")
    key_id = ce.create_data_key("local", key_material=material)
    document = dict(client.keyvault.datakeys.find_one({"_id": key_id}))
    client.keyvault.datakeys.delete_one({"_id": key_id})
    document["_id"] = Binary(b"\x00" * 16, 4)
    client.keyvault.datakeys.insert_one(document)
    encrypted = ce.encrypt("test", DET, key_id=document["_id"])
    assert bytes(encrypted) == base64.b64decode("AQAAAAAAAAAAAAAAAAAAAAACz0ZOLuuhEYi807ZXTdhbqhLaS2/t9wLifJnnNYwiw79d7"
                                                "5QYIZ6M/aYC1h9nCzCjZ7pGUpAuNnkUhnIXM3PjrA==")


# -- explicit encryption ---------------------------------------------------------------------------------

def test_binary_subtype_6_layout_and_round_trips(ce) -> None:
    key_id = ce.create_data_key("local", key_alt_names=["name"])
    for algorithm, blob_subtype in ((DET, 1), (RAND, 2)):
        encrypted = ce.encrypt({"nested": [1, "two"]} if algorithm is RAND else "text", algorithm, key_id=key_id)
        assert isinstance(encrypted, Binary) and encrypted.subtype == 6
        # BSON Binary Encrypted spec: blob subtype, then the 16-byte key UUID, then the original BSON type.
        assert encrypted[0] == blob_subtype
        assert bytes(encrypted[1:17]) == bytes(key_id)
        assert encrypted[17] == (3 if algorithm is RAND else 2)
    assert ce.decrypt(ce.encrypt(42, RAND, key_alt_name="name")) == 42
    assert ce.decrypt(ce.encrypt(7, RAND, key_id=uuid.UUID(bytes=bytes(key_id)))) == 7
    uid = uuid.uuid4()
    assert ce.decrypt(ce.encrypt(uid, RAND, key_id=key_id)) == uid  # the codec options' standard UUIDs
    assert ce.encrypt("a", DET, key_id=key_id) == ce.encrypt("a", DET, key_alt_name="name")
    assert ce.encrypt("a", RAND, key_id=key_id) != ce.encrypt("a", RAND, key_id=key_id)


def test_explicit_encryption_errors(ce) -> None:
    key_id = ce.create_data_key("local")
    with pytest.raises(TypeError, match="subtype 4"):
        ce.encrypt("x", DET, key_id=Binary(b"0" * 16, 0))
    with pytest.raises(TypeError, match="subtype 6"):
        ce.decrypt(Binary(b"x", 0))
    with pytest.raises(EncryptionError, match="not all keys requested were satisfied"):
        ce.encrypt("x", DET, key_alt_name="nobody")
    with pytest.raises(EncryptionError, match="deterministic"):
        ce.encrypt({"a": 1}, DET, key_id=key_id)  # documents only with the random algorithm
    with pytest.raises(EncryptionError):
        ce.decrypt(Binary(b"\x01" + b"\x00" * 40, 6))
    ce.close()
    with pytest.raises(InvalidOperation, match="closed ClientEncryption"):
        ce.encrypt("x", DET, key_id=key_id)
    ce.close()  # idempotent


def test_closing_while_other_greenlets_encrypt_is_safe(client) -> None:
    """close() while greenlets wait on key vault reads inside libmongocrypt state machines (a fail point holds
    the reads): the handle is freed when the last of them leaves (freeing it under them crashed the process);
    each encrypt finishes, and the decrypt after close() is refused."""
    import gevent

    with ClientEncryption(LOCAL, "keyvault.datakeys", client, OPTS) as setup:
        key_ids = [setup.create_data_key("local") for _ in range(3)]
    ce = ClientEncryption(LOCAL, "keyvault.datakeys", client, OPTS)  # a cold key cache: every call reads the vault
    encrypted: list = []

    def work(n: int) -> Any:
        encrypted.append(ce.encrypt(n, RAND, key_id=key_ids[n % 3]))
        return ce.decrypt(encrypted[-1])

    client.admin.command("configureFailPoint", "failCommand", mode="alwaysOn",
                         data={"failCommands": ["find"], "blockConnection": True, "blockTimeMS": 300})
    try:
        workers = [gevent.spawn(work, n) for n in range(50)]
        gevent.sleep(0.1)  # all of them are inside a state machine, their key vault reads held by the fail point
        handle = ce._encryption.handle
        assert handle.active == 50
        ce.close()
        gevent.joinall(workers, timeout=30)
    finally:
        client.admin.command("configureFailPoint", "failCommand", mode="off")
    assert len(encrypted) == 50 and all(value.subtype == 6 for value in encrypted)  # encrypt finished after close
    assert all(isinstance(worker.exception, InvalidOperation) for worker in workers)  # decrypt refused
    assert handle.active == 0 and handle.closing


def test_queryable_encryption_explicit_values_need_no_server_support(ce) -> None:
    key_id = ce.create_data_key("local")
    indexed = ce.encrypt("v", Algorithm.INDEXED, key_id=key_id, contention_factor=0)
    assert indexed.subtype == 6
    assert ce.decrypt(indexed) == "v"
    assert ce.decrypt(ce.encrypt("u", Algorithm.UNINDEXED, key_id=key_id)) == "u"
    query = ce.encrypt("v", Algorithm.INDEXED, key_id=key_id, query_type=QueryType.EQUALITY, contention_factor=0)
    assert query.subtype == 6
    ranged = ce.encrypt(6, Algorithm.RANGE, key_id=key_id, contention_factor=0,
                        range_opts=RangeOpts(min=0, max=200, sparsity=1, trim_factor=1))
    assert ce.decrypt(ranged) == 6
    expression = ce.encrypt_expression({"$and": [{"age": {"$gte": 5}}, {"age": {"$lt": 10}}]}, Algorithm.RANGE,
                                       key_id=key_id, query_type=QueryType.RANGE, contention_factor=0,
                                       range_opts=RangeOpts(min=0, max=200, sparsity=1, trim_factor=1))
    assert set(expression) == {"$and"}


def test_corpus_explicit_encryption_of_every_type(client) -> None:
    """The spec's corpus prose test, local KMS, explicit fields (the auto ones need mongocryptd): ciphertexts
    of the deterministic algorithm equal the corpus's, everything allowed decrypts to the original, what is not
    allowed is refused; a bypass client decrypts the whole document back."""
    client.keyvault.datakeys.insert_one(corpus_file("corpus-key-local.json"))
    # The corpus's UUIDs are Binary subtype 4 and must stay so: default codec options.
    ce = ClientEncryption(LOCAL, "keyvault.datakeys", client, CodecOptions())
    corpus = corpus_file("corpus.json")
    expected = corpus_file("corpus-encrypted.json")
    local_id = corpus_file("corpus-key-local.json")["_id"]
    copied: dict[str, Any] = {}
    checked = refused = 0
    for name, field in corpus.items():
        if not isinstance(field, dict) or field.get("kms") != "local" or field["method"] != "explicit":
            continue
        algorithm = DET if field["algo"] == "det" else RAND
        key = {"key_id": local_id} if field["identifier"] == "id" else {"key_alt_name": "local"}
        if not field["allowed"]:
            with pytest.raises(EncryptionError):
                ce.encrypt(field["value"], algorithm, **key)
            copied[name] = field
            refused += 1
            continue
        encrypted = ce.encrypt(field["value"], algorithm, **key)
        if field["algo"] == "det":
            assert encrypted == expected[name]["value"], name
        else:
            assert encrypted != expected[name]["value"], name
        assert ce.decrypt(encrypted) == ce.decrypt(expected[name]["value"]) == field["value"], name
        copied[name] = dict(field, value=encrypted)
        checked += 1
    assert checked >= 50 and refused >= 10  # the corpus's local explicit fields really ran
    # The auto fields' ciphertexts (made by mongocryptd elsewhere) decrypt here too.
    for name, field in expected.items():
        if isinstance(field, dict) and field.get("kms") == "local" and field["allowed"]:
            assert ce.decrypt(field["value"]) == corpus[name]["value"], name
    client.db.coll.insert_one(dict(copied, _id="corpus"))
    ce.close()
    host, port = client.address
    with MongoClient(host, port, auto_encryption_opts=AutoEncryptionOpts(LOCAL, "keyvault.datakeys",
                                                                         bypass_auto_encryption=True)) as reader:
        decrypted = reader.db.coll.find_one({"_id": "corpus"})
    # SecantusDB stores the deprecated undefined type as null (the undefined fields are never encrypted:
    # not allowed); every other value must come back exactly.
    for name, field in copied.items():
        if field["type"] == "undefined":
            assert decrypted[name]["value"] is None
            decrypted[name]["value"] = corpus[name]["value"]
    assert {name: value for name, value in decrypted.items() if name != "_id"} == {
        name: corpus[name] for name in copied}


# -- automatic decryption and the MongoClient wiring -----------------------------------------------------

class Events(monitoring.CommandListener):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def started(self, event: Any) -> None:
        self.events.append(event)

    def succeeded(self, event: Any) -> None:
        self.events.append(event)

    def failed(self, event: Any) -> None:
        self.events.append(event)


def test_bypass_auto_encryption_decrypts_replies_and_events_show_ciphertext(ce, client, server_uri) -> None:
    key_id = ce.create_data_key("local")
    client.db.coll.insert_many([{"_id": 1, "ssn": ce.encrypt("123-45-6789", RAND, key_id=key_id)},
                                {"_id": 2, "plain": "visible"}])
    events = Events()
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", bypass_auto_encryption=True)
    with MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[events]) as auto:
        assert auto.db.coll.find_one({"_id": 1}) == {"_id": 1, "ssn": "123-45-6789"}
        assert list(auto.db.coll.find({}, batch_size=1)) == [{"_id": 1, "ssn": "123-45-6789"},
                                                               {"_id": 2, "plain": "visible"}]
        # Writes are not encrypted under bypass: explicit ciphertext goes through as is.
        auto.db.coll.insert_one({"_id": 3, "ssn": ce.encrypt("999", DET, key_id=key_id)})
        assert auto.db.coll.find_one({"_id": 3})["ssn"] == "999"
        assert [doc["_id"] for doc in auto.db.coll.aggregate([{"$sort": {"_id": -1}}])] == [3, 2, 1]
    assert client.db.coll.find_one({"_id": 3})["ssn"].subtype == 6
    text = repr([getattr(event, "command", None) for event in events.events]
                + [getattr(event, "reply", None) for event in events.events])
    assert "123-45-6789" not in text and "999" not in text  # plaintext never reaches command monitoring
    assert any(event.command_name == "find" and getattr(event, "database_name", "") == "keyvault"
               for event in events.events)  # the key vault read (internal client, same listeners)


def test_auto_encryption_opts_validation(server_uri) -> None:
    with pytest.raises(ConfigurationError, match="Insecure TLS options prohibited"):
        AutoEncryptionOpts(LOCAL, "keyvault.datakeys", kms_tls_options={"local": {"tlsInsecure": True}})
    with pytest.raises(ConfigurationError, match="unknown TLS option"):
        AutoEncryptionOpts(LOCAL, "keyvault.datakeys", kms_tls_options={"aws": {"tlsBogus": "x"}})
    with pytest.raises(ConfigurationError, match="key_vault_namespace"):
        AutoEncryptionOpts(LOCAL, "nodot")
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", mongocryptd_spawn_args=["--port=27021"])
    assert opts._mongocryptd_spawn_args == ["--port=27021", "--idleShutdownTimeoutSecs=60"]
    assert "key" not in repr(opts) or repr(LOCAL_KEY) not in repr(opts)
    assert repr(LOCAL_KEY)[2:20] not in repr(opts)
    with pytest.raises(EncryptionError, match="local"):
        MongoClient(server_uri, connect=False,
                    auto_encryption_opts=AutoEncryptionOpts({"local": {"key": b"short"}}, "keyvault.datakeys"))


def test_automatic_encryption_without_mongocryptd_says_what_is_missing(ce, client, server_uri, tmp_path) -> None:
    key_id = ce.create_data_key("local")
    schema = {"db.coll": {"bsonType": "object", "properties": {"ssn": {"encrypt": {
        "keyId": [key_id], "bsonType": "string", "algorithm": RAND.value}}}}}
    missing = str(tmp_path / "no-such-mongocryptd")
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", schema_map=schema, mongocryptd_spawn_path=missing)
    with MongoClient(server_uri, auto_encryption_opts=opts) as auto:
        with pytest.raises(EncryptionError, match="mongocryptd could not be started.*crypt_shared") as info:
            auto.db.coll.insert_one({"ssn": "123-45-6789"})
        assert "123-45-6789" not in str(info.value)
    assert client.db.coll.count_documents({}) == 0  # nothing was written in plaintext
    # With spawning bypassed, the mongocryptd client's server selection error propagates (spec).
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", schema_map=schema, mongocryptd_bypass_spawn=True,
                              mongocryptd_uri="mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200")
    with MongoClient(server_uri, auto_encryption_opts=opts) as auto:
        auto._core.encrypter.engine.io.mongocryptd_client = MongoClient(
            "mongodb://127.0.0.1:1/", serverSelectionTimeoutMS=200, connect=False)
        with pytest.raises(EncryptionError, match="127.0.0.1:1"):
            auto.db.coll.insert_one({"ssn": "x"})
    assert client.db.coll.count_documents({}) == 0


def test_crypt_shared_required_but_missing_is_an_error(server_uri, tmp_path) -> None:
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", crypt_shared_lib_required=True,
                              crypt_shared_lib_path=str(tmp_path / "mongo_crypt_v1.so"))
    with pytest.raises(EncryptionError, match="crypt_shared"):
        MongoClient(server_uri, auto_encryption_opts=opts, connect=False)
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", crypt_shared_lib_path=str(tmp_path / "missing.so"))
    with pytest.raises(EncryptionError):  # an explicit path that does not load is an error too (libmongocrypt)
        MongoClient(server_uri, auto_encryption_opts=opts, connect=False)


def test_bypass_query_analysis_needs_no_mongocryptd(ce, server_uri) -> None:
    key_id = ce.create_data_key("local")
    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", bypass_query_analysis=True)
    with MongoClient(server_uri, auto_encryption_opts=opts) as auto:
        assert auto._core.encrypter.engine.io.mongocryptd_client is None
        auto.db.coll.insert_one({"_id": 1, "v": ce.encrypt("secret", RAND, key_id=key_id)})
        assert auto.db.coll.find_one({"_id": 1}) == {"_id": 1, "v": "secret"}


def test_automatic_encryption_cuts_write_batches_at_2_mib(ce, server_uri) -> None:
    """Client Side Encryption spec, "Size limits for Write Commands": five 800 KiB documents go in batches of
    at most 2 MiB (two, two, one); one 3 MiB document still goes, alone; bypassing automatic encryption keeps
    the server's limits (one batch)."""
    big = "x" * (800 * 1024)
    for bypass, expected in ((False, [2, 2, 1]), (True, [5])):
        events = Events()
        opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", bypass_query_analysis=not bypass,
                                  bypass_auto_encryption=bypass)
        with MongoClient(server_uri, auto_encryption_opts=opts, event_listeners=[events]) as auto:
            auto.db.drop_collection("batches")
            auto.db.batches.insert_many([{"_id": i, "s": big} for i in range(5)])
            inserts = [event.command for event in events.events
                       if isinstance(event, monitoring.CommandStartedEvent) and event.command_name == "insert"]
            assert [len(command["documents"]) for command in inserts] == expected
            if not bypass:
                auto.db.batches.insert_one({"_id": "alone", "s": "y" * (3 * 1024 * 1024)})
                assert auto.db.batches.count_documents({}) == 6


def test_client_bulk_write_refuses_automatic_encryption(server_uri) -> None:
    from greenmongo import InsertOne

    opts = AutoEncryptionOpts(LOCAL, "keyvault.datakeys", bypass_query_analysis=True)
    with MongoClient(server_uri, auto_encryption_opts=opts, connect=False) as auto:
        with pytest.raises(InvalidOperation, match="^bulkWrite does not currently support automatic encryption$"):
            auto.bulk_write([InsertOne({"x": 1}, namespace="db.coll")])


def test_create_encrypted_collection_reports_the_fields_it_made(ce, client) -> None:
    fields = {"fields": [{"path": "ssn", "bsonType": "string", "keyId": None}]}
    try:
        collection, made = ce.create_encrypted_collection(client.db, "enc", fields, "local")
    except EncryptedCollectionError as exc:  # a server without Queryable Encryption refuses the create
        made = exc.encrypted_fields
    else:
        assert collection.name == "enc"
    key_id = made["fields"][0]["keyId"]
    assert isinstance(key_id, Binary) and key_id.subtype == 4
    assert ce.get_key(key_id) is not None
    with pytest.raises(EncryptedCollectionError) as info:
        ce.create_encrypted_collection(client.db, "enc2", fields, "aws")  # aws is not configured
    assert info.value.encrypted_fields["fields"][0]["keyId"] is None
