/* The Python-facing decode functions: greenmongo/bson/codec.py's decode, decode_all and _decode_one,
 * decoder.py's decode_document, and reading the CodecOptions they are given into a Ctx once per call.
 * The element decoding itself is in _speedups_decoder.c.
 */
#include "_speedups.h"

/* -- options -------------------------------------------------------------------------------------- */

/* A small int option compared with == in Python (uuid_representation may be any object equal to one). */
static int small_int_option(PyObject *value, long *out) {
    if (PyLong_Check(value)) {
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        *out = overflow ? -1000 : v;
        return 0;
    }
    long candidate;
    *out = -1000;
    for (candidate = 0; candidate <= 8; candidate++) {
        PyObject *number = PyLong_FromLong(candidate);
        if (number == NULL) return -1;
        int eq = PyObject_RichCompareBool(value, number, Py_EQ);
        Py_DECREF(number);
        if (eq < 0) return -1;
        if (eq) {
            *out = candidate;
            break;
        }
    }
    return 0;
}

/* Read the CodecOptions fields once per call. Returns 0, -1 on error, 1 when the pure-Python decoder
 * must run instead (options this code does not handle). */
static int ctx_init(Ctx *c, PyObject *data, const unsigned char *buf, PyObject *opts) {
    memset(c, 0, sizeof *c);
    if (!PyObject_TypeCheck(opts, (PyTypeObject *)S.CodecOptions) || PyTuple_GET_SIZE(opts) < S.opt_min_size)
        return 1;
    c->data = data;
    c->buf = buf;
    c->opts = opts;
    PyObject *doc_class = PyTuple_GET_ITEM(opts, S.opt_document_class);
    c->document_class = doc_class;
    if (doc_class == (PyObject *)&PyDict_Type) {
        c->doc_kind = DOC_DICT;
    } else {
        PyObject *marker = PyObject_GetAttr(doc_class, S.s_type_marker);
        int raw = 0;
        if (marker == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
        } else {
            raw = PyObject_RichCompareBool(marker, S.int_101, Py_EQ);
            Py_DECREF(marker);
            if (raw < 0) return -1;
        }
        c->doc_kind = raw ? DOC_RAW : DOC_OTHER;
    }
    int tz_aware = PyObject_IsTrue(PyTuple_GET_ITEM(opts, S.opt_tz_aware));
    if (tz_aware < 0) return -1;
    c->tz_aware = tz_aware;
    PyObject *tzinfo = PyTuple_GET_ITEM(opts, S.opt_tzinfo);
    c->tzinfo = tzinfo == Py_None ? NULL : tzinfo;
    if (small_int_option(PyTuple_GET_ITEM(opts, S.opt_uuid_representation), &c->uuid_rep) < 0) return -1;
    if (small_int_option(PyTuple_GET_ITEM(opts, S.opt_datetime_conversion), &c->dt_conversion) < 0) return -1;
    PyObject *handler = PyTuple_GET_ITEM(opts, S.opt_unicode_handler);
    if (!PyUnicode_Check(handler)) return 1;
    Py_ssize_t size;
    const char *errors = PyUnicode_AsUTF8AndSize(handler, &size);
    if (errors == NULL) {
        PyErr_Clear();
        return 1;
    }
    if ((Py_ssize_t)strlen(errors) != size) return 1;
    c->errors = strcmp(errors, "strict") == 0 ? NULL : errors;
    PyObject *decoder_map = PyObject_GetAttr(PyTuple_GET_ITEM(opts, S.opt_type_registry), S.s_decoder_map);
    if (decoder_map == NULL) return -1;
    int has_decoders = PyObject_IsTrue(decoder_map);
    if (has_decoders <= 0) {
        Py_DECREF(decoder_map);
        return has_decoders;
    }
    c->decoder_map = decoder_map;
    return 0;
}

static void ctx_clear(Ctx *c) { Py_CLEAR(c->decoder_map); }

/* -- entry points --------------------------------------------------------------------------------- */

static int as_ssize(PyObject *value, Py_ssize_t *out) {
    if (!PyLong_Check(value)) return 1;
    *out = PyLong_AsSsize_t(value);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* decode_document(data, pos, end, opts, depth=0): raises _Malformed like the Python one. */
PyObject *gm_decode_document(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"data", "pos", "end", "opts", "depth"};
    PyObject *a[5];
    Py_ssize_t pos, end, depth = 0;
    if (gm_parse_args("decode_document", args, nargs, kwnames, names, 4, 5, a) < 0) return NULL;
    if (!S.decoder_ready) {
        PyErr_SetString(PyExc_RuntimeError, "greenmongo.bson._speedups: decoder not initialised");
        return NULL;
    }
    if (!PyBytes_Check(a[0]) || as_ssize(a[1], &pos) || as_ssize(a[2], &end) ||
        (a[4] != NULL && as_ssize(a[4], &depth)) || pos < 0 || end < pos || end > PyBytes_GET_SIZE(a[0]) ||
        depth < -1 || depth > S.max_depth + 1) {
        goto python;
    }
    Ctx c;
    int rc = ctx_init(&c, a[0], (const unsigned char *)PyBytes_AS_STRING(a[0]), a[3]);
    if (rc < 0) return NULL;
    if (rc > 0) goto python;
    PyObject *doc = gm_decode_doc(&c, pos, end, (long)depth);
    ctx_clear(&c);
    return doc;
python:
    return PyObject_Vectorcall(S.py_decode_document, args, nargs, kwnames);
}

/* 1 when codec.py has wired the entry points; 0 with a RuntimeError set. */
static int decoding_ready(void) {
    if (S.codec_ready && S.decoder_ready) return 1;
    PyErr_SetString(PyExc_RuntimeError, "greenmongo.bson._speedups: codec not initialised");
    return 0;
}

/* codec.py's _decode_one for sane offsets into ``buf``, the bytes of ``data`` (a bytes object, or a memoryview
 * the caller holds a buffer of): InvalidBSON on any failure. */
static PyObject *decode_one(PyObject *data, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, PyObject *opts,
                            Py_ssize_t *stop_out, int cursor_reply) {
    PyObject *doc = NULL;
    Py_ssize_t stop = 0;
    if (end - pos < 5) {
        gm_malformed(pos, "not enough data for a BSON document (%zd bytes)", end - pos);
    } else {
        int32_t length = gm_read_i32(buf + pos);
        stop = pos + length;
        if (length < 5) {
            gm_malformed(pos, "document length %d is below the minimum of 5", (int)length);
        } else if (stop > end) {
            gm_malformed(pos, "document length %d exceeds the %zd bytes available", (int)length, end - pos);
        } else if (buf[stop - 1] != 0) {
            gm_malformed(stop - 1, "document is not NUL-terminated");
        } else {
            Ctx c;
            int rc = ctx_init(&c, data, buf, opts);
            if (rc == 0) {
                c.cursor_reply = cursor_reply && c.decoder_map == NULL; /* type decoders see whole arrays */
                doc = gm_decode_doc(&c, pos, stop, 0);
                ctx_clear(&c);
            } else if (rc > 0) {
                PyObject *pos_obj = PyLong_FromSsize_t(pos), *stop_obj = PyLong_FromSsize_t(stop);
                /* the pure decoder reads bytes */
                PyObject *bytes = PyBytes_Check(data) ? Py_NewRef(data)
                                                      : PyBytes_FromStringAndSize((const char *)buf, stop);
                if (pos_obj != NULL && stop_obj != NULL && bytes != NULL)
                    doc = PyObject_CallFunctionObjArgs(S.py_decode_document, bytes, pos_obj, stop_obj, opts, NULL);
                Py_XDECREF(pos_obj);
                Py_XDECREF(stop_obj);
                Py_XDECREF(bytes);
            }
        }
    }
    if (doc != NULL) {
        *stop_out = stop;
        return doc;
    }
    if (PyErr_ExceptionMatches(S.Malformed)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *message = value != NULL ? PyObject_Str(value) : NULL;
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        gm_raise_from_none(S.InvalidBSON, message);
    } else if (PyErr_ExceptionMatches(S.decode_catch)) {
        /* A type constructor refused a decoded value (e.g. an invalid Decimal128 bit pattern). */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *message = PyUnicode_FromFormat("invalid BSON in document at byte %zd: %S", pos,
                                                 value != NULL ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        gm_raise_from_none(S.InvalidBSON, message);
    }
    return NULL;
}

static PyObject *decode_one_tuple(PyObject *data, Py_ssize_t pos, Py_ssize_t end, PyObject *opts) {
    Py_ssize_t stop;
    PyObject *doc = decode_one(data, (const unsigned char *)PyBytes_AS_STRING(data), pos, end, opts, &stop, 0);
    if (doc == NULL) return NULL;
    PyObject *stop_obj = PyLong_FromSsize_t(stop);
    if (stop_obj == NULL) {
        Py_DECREF(doc);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, doc, stop_obj);
    Py_DECREF(doc);
    Py_DECREF(stop_obj);
    return result;
}

PyObject *gm_decode_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"data", "pos", "end", "opts"};
    PyObject *a[4];
    Py_ssize_t pos, end;
    if (gm_parse_args("_decode_one", args, nargs, kwnames, names, 4, 4, a) < 0) return NULL;
    if (!decoding_ready()) return NULL;
    if (!PyBytes_Check(a[0]) || as_ssize(a[1], &pos) || as_ssize(a[2], &end) || pos < 0 || end < pos ||
        end > PyBytes_GET_SIZE(a[0])) {
        return PyObject_Vectorcall(S.py_decode_one, args, nargs, kwnames);
    }
    return decode_one_tuple(a[0], pos, end, a[3]);
}

/* codec.py's _as_bytes: a new reference to bytes. */
static PyObject *as_bytes(PyObject *data) {
    if (PyBytes_Check(data)) {
        Py_INCREF(data);
        return data;
    }
    /* Any buffer (bytearray, memoryview, mmap, array.array): copied, so decoding sees fixed bytes. */
    if (PyObject_CheckBuffer(data)) return PyObject_CallOneArg((PyObject *)&PyBytes_Type, data);
    PyObject *type_name = PyObject_GetAttrString((PyObject *)Py_TYPE(data), "__name__");
    if (type_name != NULL) {
        PyErr_Format(PyExc_TypeError, "BSON data must be a bytes-like object (bytes, bytearray, memoryview, mmap, "
                     "array), not %S", type_name);
        Py_DECREF(type_name);
    }
    return NULL;
}

/* The arguments of decode and its kind: ``data`` as a new reference to bytes, or to the memoryview itself
 * with ``keep_view`` (a cursor reply read in place, see decode_whole). */
static int decode_prologue(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                           PyObject **data, PyObject **opts, int keep_view) {
    static const char *const names[] = {"data", "codec_options"};
    PyObject *a[2];
    if (gm_parse_args(fname, args, nargs, kwnames, names, 1, 2, a) < 0) return -1;
    if (!decoding_ready()) return -1;
    *data = keep_view && PyMemoryView_Check(a[0]) ? Py_NewRef(a[0]) : as_bytes(a[0]);
    if (*data == NULL) return -1;
    if (gm_check_options(a[1], opts) < 0) {
        Py_CLEAR(*data);
        return -1;
    }
    return 0;
}

static PyObject *decode_whole(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                              int cursor_reply) {
    PyObject *data, *opts;
    Py_ssize_t stop, size;
    Py_buffer view = {.obj = NULL};
    const unsigned char *buf;
    /* A cursor reply's own buffer is read in place: its DocumentBatch keeps the view (whose exporter cannot be
     * resized or released while it is held). */
    if (decode_prologue(fname, args, nargs, kwnames, &data, &opts, cursor_reply) < 0) return NULL;
    if (PyBytes_Check(data)) {
        buf = (const unsigned char *)PyBytes_AS_STRING(data);
        size = PyBytes_GET_SIZE(data);
    } else {
        if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(data);
            return NULL;
        }
        buf = (const unsigned char *)view.buf;
        size = view.len;
    }
    PyObject *doc = decode_one(data, buf, 0, size, opts, &stop, cursor_reply);
    if (view.obj != NULL) PyBuffer_Release(&view);
    Py_DECREF(data);
    if (doc != NULL && stop != size) {
        Py_DECREF(doc);
        PyErr_Format(S.InvalidBSON, "%zd bytes of trailing data after the document at byte %zd", size - stop, stop);
        return NULL;
    }
    return doc;
}

PyObject *gm_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return decode_whole("decode", args, nargs, kwnames, 0);
}

/* decode, but a reply's cursor.firstBatch / cursor.nextBatch stay encoded (see lazy_batch). */
PyObject *gm_decode_cursor_reply(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    return decode_whole("decode_cursor_reply", args, nargs, kwnames, 1);
}

PyObject *gm_decode_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *data, *opts;
    if (decode_prologue("decode_all", args, nargs, kwnames, &data, &opts, 0) < 0) return NULL;
    PyObject *docs = PyList_New(0);
    Py_ssize_t pos = 0, end = PyBytes_GET_SIZE(data);
    while (docs != NULL && pos < end) {
        PyObject *doc = decode_one(data, (const unsigned char *)PyBytes_AS_STRING(data), pos, end, opts, &pos, 0);
        if (doc == NULL || PyList_Append(docs, doc) < 0) Py_CLEAR(docs);
        Py_XDECREF(doc);
    }
    Py_DECREF(data);
    return docs;
}

/* DocumentBatch's read: the document at ``pos`` of ``data`` (bytes, or a memoryview of bytes), InvalidBSON if
 * it does not decode. */
PyObject *gm_decode_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t pos, stop;
    Py_buffer view;
    if (nargs != 3 || as_ssize(args[1], &pos) || pos < 0) {
        PyErr_SetString(PyExc_TypeError, "_decode_at(data, pos, codec_options)");
        return NULL;
    }
    if (!decoding_ready()) return NULL;
    PyObject *opts;
    if (gm_check_options(args[2], &opts) < 0) return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *doc = NULL;
    if (pos > view.len)
        PyErr_Format(S.InvalidBSON, "no document at byte %zd of %zd", pos, view.len);
    else
        doc = decode_one(args[0], (const unsigned char *)view.buf, pos, view.len, opts, &stop, 0);
    PyBuffer_Release(&view);
    return doc;
}

/* -- init ----------------------------------------------------------------------------------------- */

#define REQUIRE(field, key)                                 \
    do {                                                    \
        Py_XSETREF(S.field, gm_required(ns, key));          \
        if (S.field == NULL) return -1;                     \
    } while (0)

static Py_ssize_t field_index(PyObject *fields, const char *name) {
    Py_ssize_t i;
    for (i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *item = PyTuple_GET_ITEM(fields, i);
        if (PyUnicode_Check(item) && PyUnicode_CompareWithASCIIString(item, name) == 0) return i;
    }
    PyErr_Format(PyExc_RuntimeError, "_speedups: CodecOptions has no field %s", name);
    return -1;
}

int gm_decoder_init(PyObject *ns) {
    if (gm_decoder_datetime_init() < 0) return -1;
    REQUIRE(Malformed, "_Malformed");
    REQUIRE(py_decode_document, "decode_document");
    REQUIRE(py_apply_decoders, "_apply_decoders");
    REQUIRE(py_maybe_dbref, "_maybe_dbref");
    REQUIRE(CodecOptions, "CodecOptions");
    if (!PyType_Check(S.CodecOptions) || !PyType_IsSubtype((PyTypeObject *)S.CodecOptions, &PyTuple_Type)) {
        PyErr_SetString(PyExc_RuntimeError, "_speedups: CodecOptions is not a tuple type");
        return -1;
    }
    if (gm_init_types(ns) < 0) return -1;
    PyObject *fields = PyObject_GetAttrString(S.CodecOptions, "_fields");
    if (fields == NULL) return -1;
    if (!PyTuple_Check(fields)) {
        Py_DECREF(fields);
        PyErr_SetString(PyExc_RuntimeError, "_speedups: CodecOptions._fields is not a tuple");
        return -1;
    }
    S.opt_document_class = field_index(fields, "document_class");
    S.opt_tz_aware = field_index(fields, "tz_aware");
    S.opt_uuid_representation = field_index(fields, "uuid_representation");
    S.opt_unicode_handler = field_index(fields, "unicode_decode_error_handler");
    S.opt_tzinfo = field_index(fields, "tzinfo");
    S.opt_type_registry = field_index(fields, "type_registry");
    S.opt_datetime_conversion = field_index(fields, "datetime_conversion");
    S.opt_min_size = PyTuple_GET_SIZE(fields);
    Py_DECREF(fields);
    if (S.opt_document_class < 0 || S.opt_tz_aware < 0 || S.opt_uuid_representation < 0 ||
        S.opt_unicode_handler < 0 || S.opt_tzinfo < 0 || S.opt_type_registry < 0 || S.opt_datetime_conversion < 0)
        return -1;
    return 0;
}

int gm_codec_init(PyObject *ns) {
    REQUIRE(InvalidBSON, "InvalidBSON");
    REQUIRE(InvalidDocument, "InvalidDocument");
    REQUIRE(DEFAULT_CODEC_OPTIONS, "DEFAULT_CODEC_OPTIONS");
    REQUIRE(StructError, "struct_error");
    REQUIRE(py_decode_one, "_decode_one");
    REQUIRE(DocumentBatch, "DocumentBatch");
    if (S.CodecOptions == NULL) REQUIRE(CodecOptions, "CodecOptions");
    Py_XSETREF(S.decode_catch, PyTuple_Pack(6, S.StructError, PyExc_IndexError, PyExc_ValueError,
                                            PyExc_OverflowError, PyExc_TypeError, PyExc_RecursionError));
    return S.decode_catch == NULL ? -1 : 0;
}
