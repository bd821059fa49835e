/* greenmongo.bson._speedups: module definition, shared state and helpers.
 *
 * The decoder lives in _speedups_decoder.c, the encoder in _speedups_encoder.c. The Python modules
 * (decoder.py, encoder.py, codec.py) call _init_decoder/_init_encoder/_init_codec with a dict of the
 * classes and pure functions this code needs, then rebind their public functions to the C ones.
 */
#include "_speedups.h"
#include "structmember.h"

SpeedupsState S;

PyObject *gm_required(PyObject *ns, const char *name) {
    PyObject *value = PyDict_GetItemString(ns, name); /* borrowed */
    if (value == NULL) {
        PyErr_Format(PyExc_KeyError, "_speedups init: missing %s", name);
        return NULL;
    }
    Py_INCREF(value);
    return value;
}

/* The offset of a __slots__ member of ``cls`` defined by ``cls`` itself, or -1. */
Py_ssize_t gm_slot_offset(PyObject *cls, const char *attr) {
    Py_ssize_t offset = -1;
    if (!PyType_Check(cls)) return -1;
    PyObject *descr = PyDict_GetItemString(((PyTypeObject *)cls)->tp_dict, attr); /* borrowed */
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDescrObject *member = (PyMemberDescrObject *)descr;
        if (member->d_common.d_type == (PyTypeObject *)cls && member->d_member->type == T_OBJECT_EX &&
            !(member->d_member->flags & READONLY) && member->d_member->offset > 0 &&
            member->d_member->offset + (Py_ssize_t)sizeof(PyObject *) <= ((PyTypeObject *)cls)->tp_basicsize) {
            offset = member->d_member->offset;
        }
    }
    return offset;
}

/* object.__new__(cls) plus one or two slot assignments: what the Python types' _from_wire do. */
PyObject *gm_new_with_slots(PyObject *cls, Py_ssize_t off1, PyObject *v1, Py_ssize_t off2, PyObject *v2) {
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) return NULL;
    Py_INCREF(v1);
    *(PyObject **)((char *)obj + off1) = v1;
    if (v2 != NULL) {
        Py_INCREF(v2);
        *(PyObject **)((char *)obj + off2) = v2;
    }
    return obj;
}

/* A small METH_FASTCALL|METH_KEYWORDS argument parser (borrowed references into ``out``). */
int gm_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  const char *const *names, Py_ssize_t required, Py_ssize_t total, PyObject **out) {
    Py_ssize_t i, j;
    for (i = 0; i < total; i++) out[i] = NULL;
    if (nargs > total) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)", fname, total,
                     nargs);
        return -1;
    }
    for (i = 0; i < nargs; i++) out[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (j = 0; j < nkw; j++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, j);
            Py_ssize_t found = -1;
            for (i = 0; i < total; i++) {
                if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
                    found = i;
                    break;
                }
            }
            if (found < 0) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, key);
                return -1;
            }
            if (out[found] != NULL) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[found]);
                return -1;
            }
            out[found] = args[nargs + j];
        }
    }
    for (i = 0; i < required; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %zd)", fname, names[i], i + 1);
            return -1;
        }
    }
    return 0;
}

/* codec.py's _check_options: None means the defaults; anything else must be a CodecOptions. */
int gm_check_options(PyObject *codec_options, PyObject **out) {
    if (codec_options == NULL || codec_options == Py_None) {
        *out = S.DEFAULT_CODEC_OPTIONS;
        return 0;
    }
    int ok = PyObject_IsInstance(codec_options, S.CodecOptions);
    if (ok < 0) return -1;
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "codec_options must be an instance of CodecOptions");
        return -1;
    }
    *out = codec_options;
    return 0;
}

/* ``raise type(message) from None`` */
void gm_raise_from_none(PyObject *type, PyObject *message) {
    if (message == NULL) return;
    PyObject *exc = PyObject_CallOneArg(type, message);
    Py_DECREF(message);
    if (exc == NULL) return;
    PyException_SetCause(exc, NULL); /* also sets __suppress_context__ */
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

#define REQUIRE(field, key)                        \
    do {                                           \
        Py_XSETREF(S.field, gm_required(ns, key)); \
        if (S.field == NULL) return -1;            \
    } while (0)

/* The BSON value classes, their slot offsets and the regex flag table: shared by both directions. */
int gm_init_types(PyObject *ns) {
    REQUIRE(ObjectId, "ObjectId");
    REQUIRE(Int64, "Int64");
    REQUIRE(Timestamp, "Timestamp");
    REQUIRE(Binary, "Binary");
    REQUIRE(Decimal128, "Decimal128");
    REQUIRE(Regex, "Regex");
    REQUIRE(Code, "Code");
    REQUIRE(DBRef, "DBRef");
    REQUIRE(MinKey, "MinKey");
    REQUIRE(MaxKey, "MaxKey");
    REQUIRE(Symbol, "Symbol");
    REQUIRE(DBPointer, "DBPointer");
    REQUIRE(UNDEFINED, "UNDEFINED");
    REQUIRE(DatetimeMS, "DatetimeMS");
    REQUIRE(UUID, "UUID");
    PyObject *depth = PyDict_GetItemString(ns, "MAX_NESTING_DEPTH");
    if (depth == NULL || !PyLong_Check(depth)) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups: MAX_NESTING_DEPTH missing");
        return -1;
    }
    S.max_depth = PyLong_AsLong(depth);
    if (S.max_depth == -1 && PyErr_Occurred()) return -1;
    PyObject *classes[] = {S.ObjectId, S.Int64, S.Timestamp, S.Binary, S.Decimal128, S.Regex, S.Code, S.DBRef,
                           S.MinKey, S.MaxKey, S.Symbol, S.DBPointer, S.DatetimeMS, S.UUID};
    size_t i;
    for (i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        if (!PyType_Check(classes[i])) {
            PyErr_SetString(PyExc_RuntimeError, "_speedups: a BSON class is not a class");
            return -1;
        }
    }
    if (!PyType_IsSubtype((PyTypeObject *)S.Binary, &PyBytes_Type) ||
        !PyType_IsSubtype((PyTypeObject *)S.Code, &PyUnicode_Type) ||
        !PyType_IsSubtype((PyTypeObject *)S.Int64, &PyLong_Type)) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups: unexpected BSON class layout");
        return -1;
    }
    /* Fast construction and reads through __slots__; -1 (not found) means: through Python instead. */
    S.off_oid = gm_slot_offset(S.ObjectId, "_ObjectId__id");
    S.off_ts_time = gm_slot_offset(S.Timestamp, "_Timestamp__time");
    S.off_ts_inc = gm_slot_offset(S.Timestamp, "_Timestamp__inc");
    S.off_dec_bid = gm_slot_offset(S.Decimal128, "_bid");
    S.off_code_scope = gm_slot_offset(S.Code, "_Code__scope");
    S.off_regex_pattern = gm_slot_offset(S.Regex, "pattern");
    S.off_regex_flags = gm_slot_offset(S.Regex, "flags");
    Py_XSETREF(S.py_oid_from_bytes, PyObject_GetAttrString(S.ObjectId, "_from_bytes"));
    Py_XSETREF(S.py_ts_from_wire, PyObject_GetAttrString(S.Timestamp, "_from_wire"));
    Py_XSETREF(S.py_dec_from_bid, PyObject_GetAttrString(S.Decimal128, "from_bid"));
    Py_XSETREF(S.py_code_from_wire, PyObject_GetAttrString(S.Code, "_from_wire"));
    if (!S.py_oid_from_bytes || !S.py_ts_from_wire || !S.py_dec_from_bid || !S.py_code_from_wire) return -1;
    /* BSON regex letter -> Python re flag bit, from regex.py's own table. */
    memset(S.regex_flag_bits, 0, sizeof S.regex_flag_bits);
    S.regex_flags_ok = 0;
    PyObject *bits = PyDict_GetItemString(ns, "_FLAG_BITS");
    if (bits != NULL && PyDict_Check(bits)) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        int ok = 1;
        while (PyDict_Next(bits, &pos, &key, &value)) {
            long bit = PyLong_Check(value) ? PyLong_AsLong(value) : -1;
            if (bit == -1) PyErr_Clear();
            if (!PyUnicode_Check(key) || PyUnicode_GET_LENGTH(key) != 1 || PyUnicode_READ_CHAR(key, 0) >= 128 ||
                bit <= 0 || bit > 255 || (bit & (bit - 1)) != 0) {
                ok = 0;
                break;
            }
            S.regex_flag_bits[PyUnicode_READ_CHAR(key, 0)] = (unsigned char)bit;
        }
        S.regex_flags_ok = ok;
    }
    return 0;
}

static PyObject *init_decoder(PyObject *self, PyObject *ns) {
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "_init_decoder needs a dict");
        return NULL;
    }
    if (gm_decoder_init(ns) < 0) return NULL;
    S.decoder_ready = 1;
    Py_RETURN_NONE;
}

static PyObject *init_encoder(PyObject *self, PyObject *ns) {
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "_init_encoder needs a dict");
        return NULL;
    }
    if (gm_encoder_init(ns) < 0) return NULL;
    S.encoder_ready = 1;
    Py_RETURN_NONE;
}

static PyObject *init_codec(PyObject *self, PyObject *ns) {
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "_init_codec needs a dict");
        return NULL;
    }
    if (gm_codec_init(ns) < 0) return NULL;
    S.codec_ready = 1;
    Py_RETURN_NONE;
}

static PyMethodDef speedups_methods[] = {
    {"_init_decoder", (PyCFunction)init_decoder, METH_O, "Wire the decoder to greenmongo.bson.decoder."},
    {"_init_encoder", (PyCFunction)init_encoder, METH_O, "Wire the encoder to greenmongo.bson.encoder."},
    {"_init_codec", (PyCFunction)init_codec, METH_O, "Wire the entry points to greenmongo.bson.codec."},
    {"decode_document", (PyCFunction)(void (*)(void))gm_decode_document, METH_FASTCALL | METH_KEYWORDS,
     "decode_document($module, /, data, pos, end, opts, depth=0)\n--\n\nAs greenmongo.bson.decoder.decode_document."},
    {"_decode_one", (PyCFunction)(void (*)(void))gm_decode_one, METH_FASTCALL | METH_KEYWORDS,
     "_decode_one($module, /, data, pos, end, opts)\n--\n\nAs greenmongo.bson.codec._decode_one."},
    {"decode", (PyCFunction)(void (*)(void))gm_decode, METH_FASTCALL | METH_KEYWORDS,
     "decode($module, /, data, codec_options=None)\n--\n\nDecode exactly one BSON document; trailing bytes are an error."},
    {"decode_cursor_reply", (PyCFunction)(void (*)(void))gm_decode_cursor_reply, METH_FASTCALL | METH_KEYWORDS,
     "decode_cursor_reply($module, /, data, codec_options=None)\n--\n\n"
     "As decode, but cursor.firstBatch / cursor.nextBatch of the reply become DocumentBatch objects."},
    {"_decode_at", (PyCFunction)(void (*)(void))gm_decode_at, METH_FASTCALL,
     "_decode_at($module, data, pos, codec_options, /)\n--\n\nThe document at pos of data (a DocumentBatch read)."},
    {"decode_all", (PyCFunction)(void (*)(void))gm_decode_all, METH_FASTCALL | METH_KEYWORDS,
     "decode_all($module, /, data, codec_options=None)\n--\n\nDecode a buffer of concatenated BSON documents."},
    {"encode_document", (PyCFunction)(void (*)(void))gm_encode_document, METH_FASTCALL | METH_KEYWORDS,
     "encode_document($module, /, doc, check_keys, opts, top_level=True, depth=0)\n--\n\n"
     "As greenmongo.bson.encoder.encode_document."},
    {"encode", (PyCFunction)(void (*)(void))gm_encode, METH_FASTCALL | METH_KEYWORDS,
     "encode($module, /, document, check_keys=False, codec_options=None)\n--\n\n"
     "Encode a mapping as BSON. Top-level ``_id`` is written first, as the server expects."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "greenmongo.bson._speedups",
    "Optional C accelerator for greenmongo.bson (same results and errors as the pure-Python codec).", -1,
    speedups_methods,
};

#define INTERN(field, text)                                         \
    do {                                                            \
        if ((S.field = PyUnicode_InternFromString(text)) == NULL) { \
            return NULL;                                            \
        }                                                           \
    } while (0)

PyMODINIT_FUNC PyInit__speedups(void) {
    memset(&S, 0, sizeof S);
    S.off_oid = S.off_ts_time = S.off_ts_inc = S.off_dec_bid = S.off_code_scope = -1;
    S.off_regex_pattern = S.off_regex_flags = -1;
    INTERN(s_ref, "$ref");
    INTERN(s_id, "_id");
    INTERN(s_raw, "raw");
    INTERN(s_items, "items");
    INTERN(s_type_marker, "_type_marker");
    INTERN(s_binary_subtype, "_Binary__subtype");
    INTERN(s_decoder_map, "_decoder_map");
    INTERN(s_array_element, "array element");
    INTERN(s_utcoffset, "utcoffset");
    INTERN(s_astimezone, "astimezone");
    INTERN(s_bytes, "bytes");
    INTERN(s_pattern, "pattern");
    INTERN(s_flags, "flags");
    INTERN(s_as_doc, "as_doc");
    S.kw_bytes = PyTuple_Pack(1, S.s_bytes);
    S.int_101 = PyLong_FromLong(101);
    if (S.kw_bytes == NULL || S.int_101 == NULL) return NULL;
    return PyModule_Create(&speedups_module);
}
