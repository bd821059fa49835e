/* The BSON encoder in C: greenmongo/bson/encoder.py's encode_document and codec.py's encode.
 *
 * One growable buffer per call; nested documents reserve their length prefix and patch it when done.
 * The common exact types are written here; anything else (subclasses, UUIDs, DBRefs, custom types,
 * registry encoders, ...) goes through encoder.py's _element for that one element, so its bytes and
 * errors are the Python ones by construction.
 */
#include "_speedups.h"
#include <datetime.h>

/* struct.pack's own overflow messages ("<i" and "<q"), taken from struct at init: they differ
 * between Python versions. */
static PyObject *int32_limit_message, *int64_limit_message;

enum { IN_DOCUMENT, IN_ELEMENT }; /* Int64 overflow: struct.error inline in a document, else OverflowError */

typedef struct {
    PyObject *bytes; /* the result, grown in place (no final copy); NULL until the first write */
    unsigned char *data;
    Py_ssize_t len, cap;
    int check_keys;
    PyObject *check_keys_obj; /* passed on to the Python fallbacks */
    PyObject *opts;
} Enc;

static int write_mapping(Enc *e, PyObject *doc, int top_level, long depth);
static int write_array(Enc *e, PyObject *seq, long depth);

/* -- buffer ----------------------------------------------------------------------------------------- */

static int grow(Enc *e, Py_ssize_t extra) {
    if (extra > PY_SSIZE_T_MAX / 2 - e->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = e->len + extra, cap = e->cap ? e->cap : 256;
    while (cap < need) cap *= 2;
    if (e->bytes == NULL) {
        e->bytes = PyBytes_FromStringAndSize(NULL, cap);
        if (e->bytes == NULL) return -1;
    } else if (_PyBytes_Resize(&e->bytes, cap) < 0) { /* frees the object on failure */
        return -1;
    }
    e->data = (unsigned char *)PyBytes_AS_STRING(e->bytes);
    e->cap = cap;
    return 0;
}

/* The finished bytes (a new reference), trimmed to length; the Enc no longer owns it. */
static PyObject *finish(Enc *e) {
    PyObject *result = e->bytes;
    e->bytes = NULL;
    if (result == NULL) return PyBytes_FromStringAndSize(NULL, 0);
    if (_PyBytes_Resize(&result, e->len) < 0) return NULL;
    return result;
}

static inline int put(Enc *e, const void *src, Py_ssize_t n) {
    if (e->cap - e->len < n && grow(e, n) < 0) return -1;
    memcpy(e->data + e->len, src, (size_t)n);
    e->len += n;
    return 0;
}

static inline int put_byte(Enc *e, unsigned char value) {
    if (e->cap - e->len < 1 && grow(e, 1) < 0) return -1;
    e->data[e->len++] = value;
    return 0;
}

static inline int put_i32(Enc *e, int32_t value) {
    if (e->cap - e->len < 4 && grow(e, 4) < 0) return -1;
    gm_write_u32(e->data + e->len, (uint32_t)value);
    e->len += 4;
    return 0;
}

static inline int put_i64(Enc *e, int64_t value) {
    if (e->cap - e->len < 8 && grow(e, 8) < 0) return -1;
    gm_write_u64(e->data + e->len, (uint64_t)value);
    e->len += 8;
    return 0;
}

/* A length that must fit the int32 prefix, as struct.pack("<i") demands. */
static int check_i32(Py_ssize_t n) {
    if (n > INT32_MAX) {
        PyErr_SetObject(S.StructError, int32_limit_message);
        return -1;
    }
    return 0;
}

/* Append a bytes-like object (what b"".join accepts). */
static int put_buffer(Enc *e, PyObject *obj) {
    if (PyBytes_Check(obj)) return put(e, PyBytes_AS_STRING(obj), PyBytes_GET_SIZE(obj));
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return -1;
    int rc = put(e, view.buf, view.len);
    PyBuffer_Release(&view);
    return rc;
}

/* -- text ------------------------------------------------------------------------------------------- */

/* UTF-8 of a str: into the string itself (ASCII) or a temporary bytes object in *tmp. */
static const char *utf8_of(PyObject *text, Py_ssize_t *size, PyObject **tmp) {
    *tmp = NULL;
    if (PyUnicode_IS_ASCII(text)) {
        *size = PyUnicode_GET_LENGTH(text);
        return (const char *)PyUnicode_DATA(text);
    }
    *tmp = PyUnicode_AsUTF8String(text);
    if (*tmp == NULL) return NULL;
    *size = PyBytes_GET_SIZE(*tmp);
    return PyBytes_AS_STRING(*tmp);
}

/* encoder.py's _encode_text failure: InvalidDocument(f"{what} {value!r} is not valid UTF-8: {reason}"). */
static int text_error(const char *what, PyObject *value) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *reason = exc != NULL ? PyUnicodeEncodeError_GetReason(exc) : NULL;
    if (reason != NULL)
        gm_raise_from_none(S.InvalidDocument, PyUnicode_FromFormat("%s %R is not valid UTF-8: %S", what, value,
                                                                    reason));
    Py_XDECREF(reason);
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    return -1;
}

static int invalid_document(const char *fmt, PyObject *value) {
    PyObject *message = PyUnicode_FromFormat(fmt, value);
    if (message != NULL) {
        PyErr_SetObject(S.InvalidDocument, message);
        Py_DECREF(message);
    }
    return -1;
}

/* The element name as a cstring, validated as encoder.py's _key_cstring does. */
static int write_key(Enc *e, PyObject *key) {
    if (!PyUnicode_Check(key)) return invalid_document("documents must have only string keys, key was %R", key);
    if (e->check_keys) {
        Py_ssize_t length = PyUnicode_GET_LENGTH(key);
        if (length > 0 && PyUnicode_READ_CHAR(key, 0) == '$')
            return invalid_document("key %R must not start with '$'", key);
        Py_ssize_t dot = PyUnicode_FindChar(key, '.', 0, length, 1);
        if (dot == -2) return -1;
        if (dot >= 0) return invalid_document("key %R must not contain '.'", key);
    }
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(key, &size);
    if (utf8 == NULL) return text_error("key", key);
    if (memchr(utf8, 0, (size_t)size) != NULL) return invalid_document("key %R must not contain a NUL character", key);
    if (e->cap - e->len < size + 1 && grow(e, size + 1) < 0) return -1;
    memcpy(e->data + e->len, utf8, (size_t)size);
    e->data[e->len + size] = 0;
    e->len += size + 1;
    return 0;
}

/* A length-prefixed BSON string body (int32 length, UTF-8, NUL). */
static int write_string_body(Enc *e, PyObject *text, const char *what) {
    PyObject *tmp;
    Py_ssize_t size;
    const char *utf8 = utf8_of(text, &size, &tmp);
    if (utf8 == NULL) return text_error(what, text);
    int rc = -1;
    if (check_i32(size + 1) == 0 && put_i32(e, (int32_t)(size + 1)) == 0 && put(e, utf8, size) == 0)
        rc = put_byte(e, 0);
    Py_XDECREF(tmp);
    return rc;
}

/* encoder.py's _cstring: UTF-8 without NUL, plus the terminator. */
static int write_cstring(Enc *e, PyObject *text, const char *what) {
    PyObject *tmp;
    Py_ssize_t size;
    const char *utf8 = utf8_of(text, &size, &tmp);
    if (utf8 == NULL) return text_error(what, text);
    int rc;
    if (memchr(utf8, 0, (size_t)size) != NULL) {
        PyObject *message = PyUnicode_FromFormat("%s %R must not contain a NUL character", what, text);
        if (message != NULL) {
            PyErr_SetObject(S.InvalidDocument, message);
            Py_DECREF(message);
        }
        rc = -1;
    } else {
        rc = put(e, utf8, size) == 0 ? put_byte(e, 0) : -1;
    }
    Py_XDECREF(tmp);
    return rc;
}

/* -- values ------------------------------------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* datetime_ms.datetime_to_millis for an exact datetime.datetime. 1 means "use Python" (never here). */
static int datetime_millis(PyObject *value, int64_t *out) {
    int64_t days = gm_days_from_civil(PyDateTime_GET_YEAR(value), PyDateTime_GET_MONTH(value),
                                      PyDateTime_GET_DAY(value));
    int64_t micros = days * 86400000000LL + (int64_t)PyDateTime_DATE_GET_HOUR(value) * 3600000000LL +
                     (int64_t)PyDateTime_DATE_GET_MINUTE(value) * 60000000LL +
                     (int64_t)PyDateTime_DATE_GET_SECOND(value) * 1000000LL + PyDateTime_DATE_GET_MICROSECOND(value);
    PyObject *tzinfo = PyDateTime_DATE_GET_TZINFO(value);
    if (tzinfo != Py_None) {
        PyObject *offset = PyObject_CallMethodNoArgs(value, S.s_utcoffset);
        if (offset == NULL) return -1;
        if (offset != Py_None) {
            if (!PyDelta_Check(offset)) {
                Py_DECREF(offset);
                return 1;
            }
            micros -= (int64_t)PyDateTime_DELTA_GET_DAYS(offset) * 86400000000LL +
                      (int64_t)PyDateTime_DELTA_GET_SECONDS(offset) * 1000000LL +
                      PyDateTime_DELTA_GET_MICROSECONDS(offset);
        }
        Py_DECREF(offset);
    }
    *out = floor_div(micros, 1000);
    return 0;
}

/* int_flags_to_str for an int that fits a long long: the known letters in alphabetical order. */
static int regex_letters(PyObject *flags, char *letters) {
    int overflow = 0;
    long long bits = PyLong_AsLongLongAndOverflow(flags, &overflow);
    if (bits == -1 && PyErr_Occurred()) return -1;
    if (overflow) return 1;
    int n = 0, ch;
    for (ch = 0; ch < 128; ch++) {
        if (S.regex_flag_bits[ch] && (bits & S.regex_flag_bits[ch])) letters[n++] = (char)ch;
    }
    letters[n] = 0;
    return 0;
}

/* Regex / re.Pattern with a str pattern and int flags; 1 means "use Python". */
static int write_regex(Enc *e, PyObject *value) {
    PyObject *pattern, *flags;
    if (Py_IS_TYPE(value, (PyTypeObject *)S.Regex)) {
        if (S.off_regex_pattern < 0 || S.off_regex_flags < 0) return 1;
        pattern = *(PyObject **)((char *)value + S.off_regex_pattern);
        flags = *(PyObject **)((char *)value + S.off_regex_flags);
        if (pattern == NULL || flags == NULL) return 1;
        Py_INCREF(pattern);
        Py_INCREF(flags);
    } else {
        pattern = PyObject_GetAttr(value, S.s_pattern);
        if (pattern == NULL) return -1;
        flags = PyObject_GetAttr(value, S.s_flags);
        if (flags == NULL) {
            Py_DECREF(pattern);
            return -1;
        }
    }
    int rc = 1;
    char letters[130];
    if (S.regex_flags_ok && PyUnicode_CheckExact(pattern) && PyLong_CheckExact(flags)) {
        rc = regex_letters(flags, letters);
        if (rc == 0) {
            rc = write_cstring(e, pattern, "regex pattern");
            if (rc == 0) rc = put(e, letters, (Py_ssize_t)strlen(letters) + 1);
        }
    }
    Py_DECREF(pattern);
    Py_DECREF(flags);
    return rc;
}

static int write_code(Enc *e, PyObject *value, Py_ssize_t type_at, long depth) {
    PyObject *scope = *(PyObject **)((char *)value + S.off_code_scope);
    if (scope == NULL) return 1;
    Py_INCREF(scope);
    int rc = -1;
    if (scope == Py_None) {
        e->data[type_at] = 0x0D;
        rc = write_string_body(e, value, "code");
    } else {
        e->data[type_at] = 0x0F;
        Py_ssize_t start = e->len;
        if (put_i32(e, 0) == 0 && write_string_body(e, value, "code") == 0) {
            /* encoder.py: encode_document(scope, False, opts, False, depth) */
            int saved_check = e->check_keys;
            PyObject *saved_obj = e->check_keys_obj;
            e->check_keys = 0;
            e->check_keys_obj = Py_False;
            rc = write_mapping(e, scope, 0, depth);
            e->check_keys = saved_check;
            e->check_keys_obj = saved_obj;
            if (rc == 0) {
                rc = check_i32(e->len - start);
                if (rc == 0) gm_write_u32(e->data + start, (uint32_t)(e->len - start));
            }
        }
    }
    Py_DECREF(scope);
    return rc;
}

/* encoder.py's _element for this one value: back out the name already written and append its bytes. */
static int element_in_python(Enc *e, Py_ssize_t type_at, PyObject *value, long depth) {
    PyObject *name = PyBytes_FromStringAndSize((const char *)e->data + type_at + 1, e->len - type_at - 1);
    if (name == NULL) return -1;
    PyObject *depth_obj = PyLong_FromLong(depth);
    if (depth_obj == NULL) {
        Py_DECREF(name);
        return -1;
    }
    PyObject *result = PyObject_CallFunctionObjArgs(S.py_element, name, value, e->check_keys_obj, e->opts,
                                                    depth_obj, NULL);
    Py_DECREF(name);
    Py_DECREF(depth_obj);
    if (result == NULL) return -1;
    e->len = type_at;
    int rc = put_buffer(e, result);
    Py_DECREF(result);
    return rc;
}

/* One element's value. The caller has written a placeholder type byte at ``type_at`` and the name
 * after it; the type byte is set here once the value's type is known. ``where`` picks the Int64
 * overflow error (encoder.py packs Int64 inline in documents, through _enc_int64 elsewhere). */
static int write_element(Enc *e, Py_ssize_t type_at, PyObject *value, long depth, int where) {
    PyTypeObject *type = Py_TYPE(value);
    int rc;
#define SET_TYPE(code) (e->data[type_at] = (unsigned char)(code))
    if (type == &PyUnicode_Type) {
        SET_TYPE(0x02);
        return write_string_body(e, value, "string");
    }
    if (type == &PyLong_Type || type == (PyTypeObject *)S.Int64) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (number == -1 && PyErr_Occurred()) return -1;
        if (overflow) {
            if (type != &PyLong_Type && where == IN_DOCUMENT)
                PyErr_SetObject(S.StructError, int64_limit_message);
            else
                PyErr_SetString(PyExc_OverflowError, "BSON can only handle up to 8-byte ints");
            return -1;
        }
        if (type == &PyLong_Type && number >= INT32_MIN && number <= INT32_MAX) {
            SET_TYPE(0x10);
            return put_i32(e, (int32_t)number);
        }
        SET_TYPE(0x12);
        return put_i64(e, (int64_t)number);
    }
    if (type == &PyFloat_Type) {
        double number = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        memcpy(&bits, &number, sizeof bits);
        SET_TYPE(0x01);
        if (e->cap - e->len < 8 && grow(e, 8) < 0) return -1;
        gm_write_u64(e->data + e->len, bits);
        e->len += 8;
        return 0;
    }
    if (type == &PyDict_Type) {
        SET_TYPE(0x03);
        return write_mapping(e, value, 0, depth);
    }
    if (type == &PyBool_Type) {
        SET_TYPE(0x08);
        return put_byte(e, value == Py_True ? 1 : 0);
    }
    if (type == &PyList_Type || type == &PyTuple_Type) {
        SET_TYPE(0x04);
        return write_array(e, value, depth);
    }
    if (value == Py_None) {
        SET_TYPE(0x0A);
        return 0;
    }
    if (type == &PyBytes_Type) {
        Py_ssize_t size = PyBytes_GET_SIZE(value);
        SET_TYPE(0x05);
        if (check_i32(size) < 0 || put_i32(e, (int32_t)size) < 0 || put_byte(e, 0) < 0) return -1;
        return put(e, PyBytes_AS_STRING(value), size);
    }
    if (type == (PyTypeObject *)S.ObjectId && S.off_oid >= 0) {
        PyObject *raw = *(PyObject **)((char *)value + S.off_oid);
        if (raw != NULL && PyBytes_Check(raw)) {
            SET_TYPE(0x07);
            return put(e, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw));
        }
    } else if (type == PyDateTimeAPI->DateTimeType) {
        int64_t millis;
        rc = datetime_millis(value, &millis);
        if (rc < 0) return -1;
        if (rc == 0) {
            SET_TYPE(0x09);
            return put_i64(e, millis);
        }
    } else if (type == (PyTypeObject *)S.Binary) {
        PyObject *subtype_obj = PyObject_GetAttr(value, S.s_binary_subtype);
        if (subtype_obj == NULL) return -1;
        long subtype = PyLong_CheckExact(subtype_obj) ? PyLong_AsLong(subtype_obj) : -1;
        Py_DECREF(subtype_obj);
        if (subtype == -1 && PyErr_Occurred()) PyErr_Clear();
        if (subtype >= 0 && subtype < 256) {
            Py_ssize_t size = PyBytes_GET_SIZE(value);
            SET_TYPE(0x05);
            if (subtype == 2) {
                if (check_i32(size + 4) < 0 || put_i32(e, (int32_t)(size + 4)) < 0 || put_byte(e, 2) < 0 ||
                    put_i32(e, (int32_t)size) < 0)
                    return -1;
            } else if (check_i32(size) < 0 || put_i32(e, (int32_t)size) < 0 || put_byte(e, (unsigned char)subtype) < 0) {
                return -1;
            }
            return put(e, PyBytes_AS_STRING(value), size);
        }
    } else if (type == (PyTypeObject *)S.Code && S.off_code_scope >= 0) {
        rc = write_code(e, value, type_at, depth);
        if (rc <= 0) return rc;
    } else if (type == (PyTypeObject *)S.Regex || type == (PyTypeObject *)S.RePattern) {
        Py_ssize_t mark = e->len;
        SET_TYPE(0x0B);
        rc = write_regex(e, value);
        if (rc <= 0) return rc;
        e->len = mark;
    } else if (type == (PyTypeObject *)S.Timestamp && S.off_ts_time >= 0 && S.off_ts_inc >= 0) {
        PyObject *time = *(PyObject **)((char *)value + S.off_ts_time);
        PyObject *inc = *(PyObject **)((char *)value + S.off_ts_inc);
        if (time != NULL && inc != NULL && PyLong_CheckExact(time) && PyLong_CheckExact(inc)) {
            unsigned long t = PyLong_AsUnsignedLong(time), i = PyLong_AsUnsignedLong(inc);
            if (PyErr_Occurred()) {
                PyErr_Clear();
            } else if (t <= 0xFFFFFFFFUL && i <= 0xFFFFFFFFUL) {
                SET_TYPE(0x11);
                if (put_i32(e, (int32_t)(uint32_t)i) < 0) return -1;
                return put_i32(e, (int32_t)(uint32_t)t);
            }
        }
    } else if (type == (PyTypeObject *)S.Decimal128 && S.off_dec_bid >= 0) {
        PyObject *bid = *(PyObject **)((char *)value + S.off_dec_bid);
        if (bid != NULL && PyBytes_Check(bid)) {
            SET_TYPE(0x13);
            return put(e, PyBytes_AS_STRING(bid), PyBytes_GET_SIZE(bid));
        }
    } else if (type == (PyTypeObject *)S.MinKey) {
        SET_TYPE(0xFF);
        return 0;
    } else if (type == (PyTypeObject *)S.MaxKey) {
        SET_TYPE(0x7F);
        return 0;
    }
#undef SET_TYPE
    return element_in_python(e, type_at, value, depth);
}

/* A key/value pair of a document: type placeholder, validated name, value. */
static int write_pair(Enc *e, PyObject *key, PyObject *value, long depth, int where) {
    Py_ssize_t type_at = e->len;
    if (put_byte(e, 0) < 0 || write_key(e, key) < 0) return -1;
    return write_element(e, type_at, value, depth, where);
}

/* ``skip``: a key not to write (the top-level ``_id``, already written first), or NULL. Skipping it
 * in place is much cheaper than copying a large document without it. */
static int write_dict_items(Enc *e, PyObject *dict, long depth, PyObject *skip) {
    Py_ssize_t pos = 0, used = PyDict_GET_SIZE(dict);
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (skip != NULL && (key == skip || (PyUnicode_Check(key) && PyUnicode_GET_LENGTH(key) == 3
                                             && PyUnicode_Compare(key, skip) == 0))) {
            skip = NULL; /* a dict holds one such key */
            continue;
        }
        Py_INCREF(key);
        Py_INCREF(value);
        int rc = write_pair(e, key, value, depth, IN_DOCUMENT);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc < 0) return -1;
        if (PyDict_GET_SIZE(dict) != used) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return -1;
        }
    }
    return 0;
}

/* ``for key, value in items`` for any iterable of pairs. */
static int write_items_iter(Enc *e, PyObject *items, long depth) {
    PyObject *iter = PyObject_GetIter(items);
    if (iter == NULL) return -1;
    PyObject *item;
    int rc = 0;
    while (rc == 0 && (item = PyIter_Next(iter)) != NULL) {
        PyObject *key = NULL, *value = NULL;
        if (PyTuple_CheckExact(item) && PyTuple_GET_SIZE(item) == 2) {
            key = PyTuple_GET_ITEM(item, 0);
            value = PyTuple_GET_ITEM(item, 1);
            Py_INCREF(key);
            Py_INCREF(value);
        } else {
            PyObject *pair = PySequence_Tuple(item);
            if (pair == NULL) {
                rc = -1;
            } else if (PyTuple_GET_SIZE(pair) != 2) {
                Py_ssize_t n = PyTuple_GET_SIZE(pair);
                if (n < 2)
                    PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %zd)", n);
                else
                    PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
                rc = -1;
            } else {
                key = PyTuple_GET_ITEM(pair, 0);
                value = PyTuple_GET_ITEM(pair, 1);
                Py_INCREF(key);
                Py_INCREF(value);
            }
            Py_XDECREF(pair);
        }
        Py_DECREF(item);
        if (rc == 0) rc = write_pair(e, key, value, depth, IN_DOCUMENT);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    Py_DECREF(iter);
    if (rc == 0 && PyErr_Occurred()) rc = -1;
    return rc;
}

/* RawBSONDocument check, as encode_document does for anything that is not exactly a dict:
 * 1 and *raw set for a raw document, 0 for a mapping, -1 on error (TypeError for a non-mapping). */
static int classify_mapping(PyObject *doc, PyObject **raw) {
    *raw = NULL;
    PyObject *marker = PyObject_GetAttr(doc, S.s_type_marker);
    if (marker == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
    } else {
        int is_raw = PyObject_RichCompareBool(marker, S.int_101, Py_EQ);
        Py_DECREF(marker);
        if (is_raw < 0) return -1;
        if (is_raw) {
            *raw = PyObject_GetAttr(doc, S.s_raw);
            return *raw == NULL ? -1 : 1;
        }
    }
    int ok = PyObject_IsInstance(doc, S.MappingABC);
    if (ok < 0) return -1;
    if (!ok) {
        ok = PyObject_HasAttr(doc, S.s_items);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "encoder expected a mapping type but got %R", doc);
            return -1;
        }
    }
    return 0;
}

/* encode_document's body for a document known to be a mapping (raw documents handled by the caller). */
static int write_mapping_body(Enc *e, PyObject *doc, int top_level, long depth) {
    int exact = PyDict_CheckExact(doc);
    int truth = exact ? PyDict_GET_SIZE(doc) > 0 : PyObject_IsTrue(doc);
    if (truth < 0) return -1;
    if (!truth) return put(e, "\x05\x00\x00\x00\x00", 5);
    if (depth > S.max_depth) {
        PyErr_Format(S.InvalidDocument, "document nests deeper than %ld levels (a reference cycle?)", S.max_depth);
        return -1;
    }
    Py_ssize_t start = e->len;
    if (put_i32(e, 0) < 0) return -1;
    PyObject *items = NULL, *rest = NULL;
    int rc = -1, skip_id = 0;
    if (!exact && (items = PyObject_CallMethodNoArgs(doc, S.s_items)) == NULL) goto done;
    if (top_level) { /* the server wants _id first */
        int has_id = exact ? PyDict_Contains(doc, S.s_id) : PySequence_Contains(doc, S.s_id);
        if (has_id < 0) goto done;
        if (has_id) {
            PyObject *first = NULL;
            if (exact) {
                Py_ssize_t pos = 0;
                PyObject *value;
                if (PyDict_Next(doc, &pos, &first, &value)) Py_INCREF(first);
            } else {
                PyObject *iter = PyObject_GetIter(doc);
                if (iter == NULL) goto done;
                first = PyIter_Next(iter);
                Py_DECREF(iter);
                if (first == NULL && !PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
            }
            if (first == NULL) goto done;
            int not_first = PyObject_RichCompareBool(first, S.s_id, Py_NE);
            Py_DECREF(first);
            if (not_first < 0) goto done;
            if (not_first) {
                PyObject *id_value = PyObject_GetItem(doc, S.s_id);
                if (id_value == NULL) goto done;
                Py_ssize_t type_at = e->len;
                int id_rc = -1;
                if (put(e, "\x00_id\x00", 5) == 0) id_rc = write_element(e, type_at, id_value, depth + 1, IN_ELEMENT);
                Py_DECREF(id_value);
                if (id_rc < 0) goto done;
                if (exact) {
                    skip_id = 1;
                } else {
                    if ((rest = PyDict_New()) != NULL && PyDict_MergeFromSeq2(rest, items, 1) < 0) Py_CLEAR(rest);
                    if (rest == NULL || PyDict_DelItem(rest, S.s_id) < 0) goto done;
                }
            }
        }
    }
    if (rest != NULL)
        rc = write_dict_items(e, rest, depth + 1, NULL);
    else if (exact)
        rc = write_dict_items(e, doc, depth + 1, skip_id ? S.s_id : NULL);
    else
        rc = write_items_iter(e, items, depth + 1);
    if (rc == 0) rc = put_byte(e, 0);
    if (rc == 0) rc = check_i32(e->len - start);
    if (rc == 0) gm_write_u32(e->data + start, (uint32_t)(e->len - start));
done:
    Py_XDECREF(items);
    Py_XDECREF(rest);
    return rc;
}

/* encode_document(doc, ...) appended to the buffer. */
static int write_mapping(Enc *e, PyObject *doc, int top_level, long depth) {
    if (!PyDict_CheckExact(doc)) {
        PyObject *raw;
        int kind = classify_mapping(doc, &raw);
        if (kind < 0) return -1;
        if (kind > 0) {
            int rc = put_buffer(e, raw);
            Py_DECREF(raw);
            return rc;
        }
    }
    return write_mapping_body(e, doc, top_level, depth);
}

static int write_array(Enc *e, PyObject *seq, long depth) {
    if (depth > S.max_depth) {
        PyErr_Format(S.InvalidDocument, "document nests deeper than %ld levels (a reference cycle?)", S.max_depth);
        return -1;
    }
    Py_ssize_t start = e->len, i;
    if (put_i32(e, 0) < 0) return -1;
    int is_list = PyList_Check(seq);
    for (i = 0; i < (is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq)); i++) {
        PyObject *value = is_list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
        char name[32];
        int n = snprintf(name, sizeof name, "%zd", i);
        Py_ssize_t type_at = e->len;
        if (e->cap - e->len < n + 2 && grow(e, n + 2) < 0) return -1;
        e->data[e->len] = 0;
        memcpy(e->data + e->len + 1, name, (size_t)n + 1);
        e->len += n + 2;
        Py_INCREF(value);
        int rc = write_element(e, type_at, value, depth + 1, IN_ELEMENT);
        Py_DECREF(value);
        if (rc < 0) return -1;
    }
    if (put_byte(e, 0) < 0 || check_i32(e->len - start) < 0) return -1;
    gm_write_u32(e->data + start, (uint32_t)(e->len - start));
    return 0;
}

/* -- entry points ------------------------------------------------------------------------------------ */

static PyObject *encode_impl(PyObject *doc, PyObject *check_keys, PyObject *opts, int top_level, long depth) {
    if (!PyDict_CheckExact(doc)) {
        PyObject *raw;
        int kind = classify_mapping(doc, &raw);
        if (kind < 0) return NULL;
        if (kind > 0) return raw; /* RawBSONDocument: already BSON */
    }
    int check = PyObject_IsTrue(check_keys);
    if (check < 0) return NULL;
    Enc e = {NULL, NULL, 0, 0, check, check_keys, opts};
    PyObject *result = NULL;
    if (write_mapping_body(&e, doc, top_level, depth) == 0) result = finish(&e);
    Py_XDECREF(e.bytes);
    return result;
}

/* encode_document(doc, check_keys, opts, top_level=True, depth=0) */
PyObject *gm_encode_document(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"doc", "check_keys", "opts", "top_level", "depth"};
    PyObject *a[5];
    if (gm_parse_args("encode_document", args, nargs, kwnames, names, 3, 5, a) < 0) return NULL;
    if (!S.encoder_ready) {
        PyErr_SetString(PyExc_RuntimeError, "greenmongo.bson._speedups: encoder not initialised");
        return NULL;
    }
    long depth = 0;
    if (a[4] != NULL) {
        int overflow = 0;
        depth = PyLong_Check(a[4]) ? PyLong_AsLongAndOverflow(a[4], &overflow) : 0;
        if (!PyLong_Check(a[4]) || overflow || (depth == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return PyObject_Vectorcall(S.py_encode_document, args, nargs, kwnames);
        }
    }
    int top_level = a[3] == NULL ? 1 : PyObject_IsTrue(a[3]);
    if (top_level < 0) return NULL;
    return encode_impl(a[0], a[1], a[2], top_level, depth);
}

/* encode(document, check_keys=False, codec_options=None) */
PyObject *gm_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static const char *const names[] = {"document", "check_keys", "codec_options"};
    PyObject *a[3], *opts;
    if (gm_parse_args("encode", args, nargs, kwnames, names, 1, 3, a) < 0) return NULL;
    if (!S.encoder_ready || !S.codec_ready) {
        PyErr_SetString(PyExc_RuntimeError, "greenmongo.bson._speedups: codec not initialised");
        return NULL;
    }
    if (gm_check_options(a[2], &opts) < 0) return NULL;
    PyObject *result = encode_impl(a[0], a[1] == NULL ? Py_False : a[1], opts, 1, 0);
    if (result != NULL) return result;
    if (PyErr_ExceptionMatches(PyExc_RecursionError)) {
        PyErr_Clear();
        gm_raise_from_none(S.InvalidDocument,
                           PyUnicode_FromString("document nests too deeply to encode (a reference cycle?)"));
    } else if (PyErr_ExceptionMatches(S.StructError)) { /* an Int64 (or subclass) outside 64 bits */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *message = PyUnicode_FromFormat("BSON can only handle up to 8-byte ints: %S",
                                                 value != NULL ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        gm_raise_from_none(PyExc_OverflowError, message);
    }
    if (PyErr_ExceptionMatches(S.InvalidDocument)) { /* codec.py: InvalidDocument.document is the document */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value != NULL) {
            PyObject *current = PyObject_GetAttrString(value, "_document");
            if (current == NULL) {
                PyErr_Clear();
            } else {
                if (current == Py_None && PyObject_SetAttrString(value, "_document", a[0]) < 0) PyErr_Clear();
                Py_DECREF(current);
            }
        }
        PyErr_Restore(type, value, tb);
    }
    return NULL;
}

/* str(the struct.error) of struct.pack(fmt, value), or NULL. */
static PyObject *struct_overflow_message(const char *fmt, PyObject *value) {
    PyObject *module = PyImport_ImportModule("struct");
    if (module == NULL) return NULL;
    PyObject *packed = PyObject_CallMethod(module, "pack", "sO", fmt, value);
    Py_DECREF(module);
    if (packed != NULL) {
        Py_DECREF(packed);
        PyErr_Format(PyExc_RuntimeError, "_speedups: struct.pack(%s) did not overflow", fmt);
        return NULL;
    }
    if (!PyErr_ExceptionMatches(S.StructError)) return NULL;
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    PyObject *message = exc != NULL ? PyObject_Str(exc) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(exc);
    Py_XDECREF(tb);
    return message;
}

int gm_encoder_init(PyObject *ns) {
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) return -1;
    if (gm_init_types(ns) < 0) return -1;
    Py_XSETREF(S.InvalidDocument, gm_required(ns, "InvalidDocument"));
    Py_XSETREF(S.StructError, gm_required(ns, "struct_error"));
    Py_XSETREF(S.py_element, gm_required(ns, "_element"));
    Py_XSETREF(S.py_encode_document, gm_required(ns, "encode_document"));
    Py_XSETREF(S.RePattern, gm_required(ns, "_RE_TYPE"));
    Py_XSETREF(S.MappingABC, gm_required(ns, "Mapping"));
    if (!S.InvalidDocument || !S.StructError || !S.py_element || !S.py_encode_document || !S.RePattern ||
        !S.MappingABC)
        return -1;
    PyObject *big32 = PyLong_FromLongLong(1LL << 31);
    PyObject *big64 = PyLong_FromUnsignedLongLong(1ULL << 63);
    if (big32 != NULL && big64 != NULL) {
        Py_XSETREF(int32_limit_message, struct_overflow_message("<i", big32));
        Py_XSETREF(int64_limit_message, struct_overflow_message("<q", big64));
    }
    Py_XDECREF(big32);
    Py_XDECREF(big64);
    return int32_limit_message != NULL && int64_limit_message != NULL ? 0 : -1;
}
