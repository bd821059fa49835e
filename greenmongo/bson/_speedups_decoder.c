/* The BSON decoder in C: the element loops of greenmongo/bson/decoder.py (decode_document, decode_array
 * and the table decoders). The Python-facing functions are in _speedups_decode_api.c.
 *
 * Every read is bounds-checked against the offset of the enclosing document's terminating NUL
 * ("last"), in the same order as the Python code, and every failure raises the same _Malformed
 * message (turned into InvalidBSON by the entry points). Values are built as the Python code builds
 * them; the rarer ones by calling the Python classes.
 */
#include "_speedups.h"
#include <datetime.h>
#include <stdarg.h>

enum { CTX_DOC, CTX_ARRAY };
#define MIN_DATETIME_MS (-62135596800000LL)
#define MAX_DATETIME_MS (253402300799999LL)
#define DT_CLAMP 2
#define DT_MS 3
#define DT_AUTO 4

static PyObject *decode_arr(Ctx *c, Py_ssize_t pos, Py_ssize_t end, long depth);

/* decoder.py's _fail: _Malformed(f"{message} at byte {position}"). Always returns NULL. */
PyObject *gm_malformed(Py_ssize_t at, const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *message = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (message == NULL) return NULL;
    PyObject *full = PyUnicode_FromFormat("%U at byte %zd", message, at);
    Py_DECREF(message);
    if (full == NULL) return NULL;
    PyErr_SetObject(S.Malformed, full);
    Py_DECREF(full);
    return NULL;
}

/* After a failed UTF-8 decode: a UnicodeDecodeError becomes _Malformed("<prefix> is not valid UTF-8
 * (<reason>)" at base + exc.start); any other error (a bad handler name, ...) propagates. */
static PyObject *utf8_error(Py_ssize_t base, const char *prefix_fmt, ...) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
    PyObject *type, *value, *tb, *reason = NULL, *prefix = NULL;
    Py_ssize_t start = 0;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && PyUnicodeDecodeError_GetStart(value, &start) == 0 &&
        (reason = PyUnicodeDecodeError_GetReason(value)) != NULL) {
        va_list va;
        va_start(va, prefix_fmt);
        prefix = PyUnicode_FromFormatV(prefix_fmt, va);
        va_end(va);
        if (prefix != NULL) gm_malformed(base + start, "%U is not valid UTF-8 (%S)", prefix, reason);
    }
    Py_XDECREF(reason);
    Py_XDECREF(prefix);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
}

/* -- element names -------------------------------------------------------------------------------
 * Field names repeat across the documents of a reply, so short ASCII names are kept in a small
 * direct-mapped cache of str objects (bounded: KEY_CACHE_SIZE entries): a hit skips the UTF-8 decode
 * and, since a str caches its hash, the rehash on dict insertion. Strings are immutable, so sharing
 * one is invisible to callers. */

#define KEY_CACHE_SIZE 1024
#define KEY_CACHE_MAX_LENGTH 32

static PyObject *key_cache[KEY_CACHE_SIZE];

static PyObject *element_name(const unsigned char *p, Py_ssize_t size) {
    if (size > KEY_CACHE_MAX_LENGTH) return PyUnicode_DecodeUTF8((const char *)p, size, NULL);
    uint32_t hash = 5381u + (uint32_t)size;
    unsigned char high = 0;
    Py_ssize_t i;
    for (i = 0; i < size; i++) {
        hash = (hash * 33u) ^ p[i];
        high |= p[i];
    }
    if (high & 0x80) return PyUnicode_DecodeUTF8((const char *)p, size, NULL); /* not ASCII */
    PyObject **slot = &key_cache[(hash ^ (hash >> 15)) & (KEY_CACHE_SIZE - 1)];
    PyObject *cached = *slot;
    if (cached != NULL && PyUnicode_GET_LENGTH(cached) == size && memcmp(PyUnicode_DATA(cached), p, (size_t)size) == 0) {
        Py_INCREF(cached);
        return cached;
    }
    PyObject *name = PyUnicode_DecodeUTF8((const char *)p, size, NULL);
    if (name == NULL) return NULL;
    (void)PyObject_Hash(name); /* computed once, reused by every dict the cached name goes into */
    Py_INCREF(name);
    Py_XSETREF(*slot, name);
    return name;
}

/* -- value construction ------------------------------------------------------------------------ */

static PyObject *make_objectid(const unsigned char *p) {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 12);
    if (raw == NULL) return NULL;
    PyObject *oid = S.off_oid >= 0 ? gm_new_with_slots(S.ObjectId, S.off_oid, raw, -1, NULL)
                                   : PyObject_CallOneArg(S.py_oid_from_bytes, raw);
    Py_DECREF(raw);
    return oid;
}

static PyObject *make_code(PyObject *code, PyObject *scope) {
    if (S.off_code_scope < 0) return PyObject_CallFunctionObjArgs(S.py_code_from_wire, code, scope, NULL);
    PyObject *args = PyTuple_Pack(1, code);
    if (args == NULL) return NULL;
    PyObject *obj = PyUnicode_Type.tp_new((PyTypeObject *)S.Code, args, NULL); /* str.__new__(Code, code) */
    Py_DECREF(args);
    if (obj == NULL) return NULL;
    Py_INCREF(scope);
    *(PyObject **)((char *)obj + S.off_code_scope) = scope;
    return obj;
}

static PyObject *make_binary(PyObject *payload, int subtype) {
    PyObject *args = PyTuple_Pack(1, payload);
    if (args == NULL) return NULL;
    PyObject *obj = PyBytes_Type.tp_new((PyTypeObject *)S.Binary, args, NULL); /* bytes.__new__(Binary, b) */
    Py_DECREF(args);
    if (obj == NULL) return NULL;
    PyObject *st = PyLong_FromLong(subtype);
    if (st == NULL || PyObject_SetAttr(obj, S.s_binary_subtype, st) < 0) {
        Py_XDECREF(st);
        Py_DECREF(obj);
        return NULL;
    }
    Py_DECREF(st);
    return obj;
}

static PyObject *make_uuid(const unsigned char *p) {
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, 16);
    if (raw == NULL) return NULL;
    PyObject *args[1] = {raw};
    PyObject *value = PyObject_Vectorcall(S.UUID, args, 0, S.kw_bytes); /* uuid.UUID(bytes=raw) */
    Py_DECREF(raw);
    return value;
}

static PyObject *make_datetime_ms(long long millis) {
    PyObject *number = PyLong_FromLongLong(millis);
    if (number == NULL) return NULL;
    PyObject *value = PyObject_CallOneArg(S.DatetimeMS, number);
    Py_DECREF(number);
    return value;
}

/* decoder.py's _millis_to_value. ``pos`` is where the 8 bytes start (for errors). */
static PyObject *millis_to_value(Ctx *c, long long millis, PyObject *name, Py_ssize_t pos) {
    long conversion = c->dt_conversion;
    if (conversion == DT_MS) return make_datetime_ms(millis);
    if (millis < MIN_DATETIME_MS || millis > MAX_DATETIME_MS) {
        if (conversion == DT_AUTO) return make_datetime_ms(millis);
        if (conversion == DT_CLAMP) {
            millis = millis < MIN_DATETIME_MS ? MIN_DATETIME_MS : MAX_DATETIME_MS;
        } else {
            return gm_malformed(pos,
                             "datetime %R (%lld ms) is out of datetime.datetime's range; decode it with "
                             "CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO) or DATETIME_MS",
                             name, millis);
        }
    }
    long long days = millis / 86400000LL, rest = millis % 86400000LL;
    if (rest < 0) {
        rest += 86400000LL;
        days -= 1;
    }
    int year, month, day;
    gm_civil_from_days(days, &year, &month, &day);
    int hour = (int)(rest / 3600000), minute = (int)(rest / 60000 % 60), second = (int)(rest / 1000 % 60);
    int micro = (int)(rest % 1000) * 1000;
    if (!c->tz_aware) return PyDateTime_FromDateAndTime(year, month, day, hour, minute, second, micro);
    PyObject *value = PyDateTimeAPI->DateTime_FromDateAndTime(year, month, day, hour, minute, second, micro,
                                                              PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
    if (value == NULL || c->tzinfo == NULL) return value;
    PyObject *local = PyObject_CallMethodOneArg(value, S.s_astimezone, c->tzinfo);
    Py_DECREF(value);
    if (local == NULL && PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        return gm_malformed(pos, "datetime %R overflows in time zone %S", name, c->tzinfo);
    }
    return local;
}

/* -- shared readers (decoder.py's _read_string, _read_cstring, _document_bounds) ------------------- */

static PyObject *read_string(Ctx *c, Py_ssize_t pos, Py_ssize_t end, const char *kind, PyObject *name,
                             Py_ssize_t *next) {
    if (pos + 4 > end) return gm_malformed(pos, "%s %R length runs past the end of its document", kind, name);
    int32_t length = gm_read_i32(c->buf + pos);
    Py_ssize_t start = pos + 4, stop = start + length;
    if (length < 1 || stop > end) return gm_malformed(pos, "%s %R has invalid length %d", kind, name, (int)length);
    if (c->buf[stop - 1] != 0) return gm_malformed(stop - 1, "%s %R is not NUL-terminated", kind, name);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->buf + start, length - 1, c->errors);
    if (text == NULL) return utf8_error(start, "%s %R", kind, name);
    *next = stop;
    return text;
}

static PyObject *read_cstring(Ctx *c, Py_ssize_t pos, Py_ssize_t end, const char *kind, PyObject *name,
                              Py_ssize_t *next) {
    const unsigned char *nul = pos < end ? memchr(c->buf + pos, 0, (size_t)(end - pos)) : NULL;
    if (nul == NULL) return gm_malformed(pos, "%s %R is not NUL-terminated", kind, name);
    Py_ssize_t stop = nul - c->buf;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)c->buf + pos, stop - pos, NULL);
    if (text == NULL) return utf8_error(pos, "%s %R", kind, name);
    *next = stop + 1;
    return text;
}

static int document_bounds(Ctx *c, Py_ssize_t pos, Py_ssize_t end, const char *kind, PyObject *name,
                           Py_ssize_t *stop_out) {
    if (pos + 5 > end) {
        gm_malformed(pos, "%s %R is truncated", kind, name);
        return -1;
    }
    int32_t length = gm_read_i32(c->buf + pos);
    Py_ssize_t stop = pos + length;
    if (length < 5 || stop > end) {
        gm_malformed(pos, "%s %R has invalid length %d", kind, name, (int)length);
        return -1;
    }
    if (c->buf[stop - 1] != 0) {
        gm_malformed(stop - 1, "%s %R is not NUL-terminated", kind, name);
        return -1;
    }
    *stop_out = stop;
    return 0;
}

/* -- the less common types (decoder.py's table decoders) ------------------------------------------ */

static PyObject *decode_binary(Ctx *c, Py_ssize_t *ppos, Py_ssize_t end, PyObject *name) {
    Py_ssize_t pos = *ppos;
    const unsigned char *buf = c->buf;
    if (pos + 5 > end) return gm_malformed(pos, "binary %R is truncated", name);
    int32_t length = gm_read_i32(buf + pos);
    int subtype = buf[pos + 4];
    Py_ssize_t start = pos + 5, stop = start + length;
    if (length < 0 || stop > end) return gm_malformed(pos, "binary %R has invalid length %d", name, (int)length);
    if (subtype == 2) {
        if (length < 4) return gm_malformed(pos, "old binary %R is too short for its inner length", name);
        int32_t inner = gm_read_i32(buf + start);
        if (inner != length - 4)
            return gm_malformed(start, "old binary %R inner length %d does not match %d", name, (int)inner,
                             (int)(length - 4));
        start += 4;
    }
    *ppos = stop;
    if (length == 16 && (subtype == 4 || subtype == 3)) {
        long rep = c->uuid_rep;
        if (subtype == 4 && rep == 4) return make_uuid(buf + start);
        if (subtype == 3 && rep == 3) return make_uuid(buf + start);
        if (subtype == 3 && (rep == 5 || rep == 6)) {
            unsigned char swapped[16];
            const unsigned char *p = buf + start;
            int i;
            if (rep == 5) { /* JAVA_LEGACY: each 8-byte half reversed */
                for (i = 0; i < 8; i++) {
                    swapped[i] = p[7 - i];
                    swapped[8 + i] = p[15 - i];
                }
            } else { /* CSHARP_LEGACY: bytes_le */
                swapped[0] = p[3]; swapped[1] = p[2]; swapped[2] = p[1]; swapped[3] = p[0];
                swapped[4] = p[5]; swapped[5] = p[4]; swapped[6] = p[7]; swapped[7] = p[6];
                memcpy(swapped + 8, p + 8, 8);
            }
            return make_uuid(swapped);
        }
    }
    PyObject *payload = PyBytes_FromStringAndSize((const char *)buf + start, stop - start);
    if (payload == NULL || subtype == 0) return payload;
    PyObject *value = make_binary(payload, subtype);
    Py_DECREF(payload);
    return value;
}

static PyObject *decode_regex(Ctx *c, Py_ssize_t *ppos, Py_ssize_t end, PyObject *name) {
    Py_ssize_t pos = *ppos;
    PyObject *pattern = read_cstring(c, pos, end, "regex pattern", name, &pos);
    if (pattern == NULL) return NULL;
    PyObject *flags = read_cstring(c, pos, end, "regex flags", name, &pos);
    if (flags == NULL) {
        Py_DECREF(pattern);
        return NULL;
    }
    PyObject *value = NULL;
    if (S.regex_flags_ok && S.off_regex_pattern >= 0 && S.off_regex_flags >= 0) {
        long bits = 0;
        Py_ssize_t i, n = PyUnicode_GET_LENGTH(flags);
        for (i = 0; i < n; i++) {
            Py_UCS4 ch = PyUnicode_READ_CHAR(flags, i);
            if (ch < 128) bits |= S.regex_flag_bits[ch];
        }
        PyObject *number = PyLong_FromLong(bits);
        if (number != NULL) {
            value = gm_new_with_slots(S.Regex, S.off_regex_pattern, pattern, S.off_regex_flags, number);
            Py_DECREF(number);
        }
    } else {
        value = PyObject_CallFunctionObjArgs(S.Regex, pattern, flags, NULL);
    }
    Py_DECREF(pattern);
    Py_DECREF(flags);
    if (value != NULL) *ppos = pos;
    return value;
}

static PyObject *decode_code_w_scope(Ctx *c, Py_ssize_t *ppos, Py_ssize_t end, PyObject *name, long depth) {
    Py_ssize_t pos = *ppos, scope_pos, scope_end;
    if (pos + 4 > end) return gm_malformed(pos, "code with scope %R is truncated", name);
    int32_t total = gm_read_i32(c->buf + pos);
    Py_ssize_t stop = pos + total;
    if (total < 14 || stop > end) return gm_malformed(pos, "code with scope %R has invalid length %d", name, (int)total);
    PyObject *code = read_string(c, pos + 4, stop, "code with scope", name, &scope_pos);
    if (code == NULL) return NULL;
    if (document_bounds(c, scope_pos, stop, "scope of", name, &scope_end) < 0) {
        Py_DECREF(code);
        return NULL;
    }
    if (scope_end != stop) {
        Py_DECREF(code);
        return gm_malformed(pos, "code with scope %R length %d does not match its contents", name, (int)total);
    }
    PyObject *scope = gm_decode_doc(c, scope_pos, scope_end, depth + 1);
    if (scope == NULL) {
        Py_DECREF(code);
        return NULL;
    }
    if (Py_IS_TYPE(scope, (PyTypeObject *)S.DBRef)) { /* a scope is a plain document even if it looks like a DBRef */
        PyObject *doc = PyObject_CallMethodNoArgs(scope, S.s_as_doc);
        Py_DECREF(scope);
        if (doc == NULL) {
            Py_DECREF(code);
            return NULL;
        }
        scope = doc;
    }
    PyObject *value = make_code(code, scope);
    Py_DECREF(code);
    Py_DECREF(scope);
    if (value != NULL) *ppos = stop;
    return value;
}

/* -- one element's value ---------------------------------------------------------------------------
 * ``ctx`` picks the messages: decode_document and decode_array check some types inline with their own
 * wording; the rest use the table decoders' wording with ``name`` ('array element' in arrays). */
static PyObject *decode_value(Ctx *c, unsigned char type, Py_ssize_t *ppos, Py_ssize_t last, PyObject *name,
                              long depth, int ctx, Py_ssize_t nul) {
    const unsigned char *buf = c->buf;
    Py_ssize_t pos = *ppos, stop;
    PyObject *value;
    int32_t length;
    switch (type) {
    case 0x01:
        if (pos + 8 > last)
            return ctx == CTX_ARRAY ? gm_malformed(pos, "double in array is truncated")
                                    : gm_malformed(pos, "double %R is truncated", name);
        *ppos = pos + 8;
        return PyFloat_FromDouble(gm_read_double(buf + pos));
    case 0x02:
        if (pos + 4 > last)
            return ctx == CTX_ARRAY ? gm_malformed(pos, "string in array is truncated")
                                    : gm_malformed(pos, "string %R is truncated", name);
        length = gm_read_i32(buf + pos);
        stop = pos + 4 + (Py_ssize_t)length;
        if (length < 1 || stop > last || buf[stop - 1] != 0)
            return ctx == CTX_ARRAY
                       ? gm_malformed(pos, "string in array has invalid length %d or no NUL", (int)length)
                       : gm_malformed(pos, "string %R has invalid length %d or no NUL", name, (int)length);
        value = PyUnicode_DecodeUTF8((const char *)buf + pos + 4, length - 1, c->errors);
        if (value == NULL)
            return ctx == CTX_ARRAY ? utf8_error(pos + 4, "string in array") : utf8_error(pos + 4, "string %R", name);
        *ppos = stop;
        return value;
    case 0x03:
        if (pos + 5 > last)
            return ctx == CTX_ARRAY ? gm_malformed(pos, "document in array is truncated")
                                    : gm_malformed(pos, "document %R is truncated", name);
        stop = pos + (Py_ssize_t)gm_read_i32(buf + pos);
        if (stop < pos + 5 || stop > last || buf[stop - 1] != 0)
            return ctx == CTX_ARRAY
                       ? gm_malformed(pos, "document in array has an invalid length or no terminating NUL")
                       : gm_malformed(pos, "document %R has an invalid length or no terminating NUL", name);
        value = gm_decode_doc(c, pos, stop, depth + 1);
        if (value != NULL) *ppos = stop;
        return value;
    case 0x04:
        if (ctx == CTX_ARRAY) {
            if (document_bounds(c, pos, last, "array", name, &stop) < 0) return NULL;
        } else {
            if (pos + 5 > last) return gm_malformed(pos, "array %R is truncated", name);
            stop = pos + (Py_ssize_t)gm_read_i32(buf + pos);
            if (stop < pos + 5 || stop > last || buf[stop - 1] != 0)
                return gm_malformed(pos, "array %R has an invalid length or no terminating NUL", name);
        }
        value = decode_arr(c, pos, stop, depth + 1);
        if (value != NULL) *ppos = stop;
        return value;
    case 0x05:
        return decode_binary(c, ppos, last, name);
    case 0x06:
        Py_INCREF(S.UNDEFINED);
        return S.UNDEFINED;
    case 0x07:
        if (pos + 12 > last) return gm_malformed(pos, "ObjectId %R is truncated", name);
        *ppos = pos + 12;
        return make_objectid(buf + pos);
    case 0x08:
        if (ctx == CTX_ARRAY) {
            if (pos + 1 > last) return gm_malformed(pos, "boolean %R is truncated", name);
            if (buf[pos] > 1) return gm_malformed(pos, "boolean %R has invalid value %d", name, (int)buf[pos]);
        } else if (pos >= last || buf[pos] > 1) {
            return gm_malformed(pos, "boolean %R is truncated or not 0/1", name);
        }
        *ppos = pos + 1;
        return PyBool_FromLong(buf[pos]);
    case 0x09:
        if (pos + 8 > last) return gm_malformed(pos, "datetime %R is truncated", name);
        value = millis_to_value(c, (long long)gm_read_i64(buf + pos), name, pos);
        if (value != NULL) *ppos = pos + 8;
        return value;
    case 0x0A:
        Py_RETURN_NONE;
    case 0x0B:
        return decode_regex(c, ppos, last, name);
    case 0x0C: {
        PyObject *namespace_ = read_string(c, pos, last, "DBPointer namespace", name, &pos);
        if (namespace_ == NULL) return NULL;
        if (pos + 12 > last) {
            Py_DECREF(namespace_);
            return gm_malformed(pos, "DBPointer %R ObjectId is truncated", name);
        }
        PyObject *oid = make_objectid(buf + pos);
        value = oid == NULL ? NULL : PyObject_CallFunctionObjArgs(S.DBPointer, namespace_, oid, NULL);
        Py_DECREF(namespace_);
        Py_XDECREF(oid);
        if (value != NULL) *ppos = pos + 12;
        return value;
    }
    case 0x0D: {
        PyObject *code = read_string(c, pos, last, "code", name, &pos);
        if (code == NULL) return NULL;
        value = make_code(code, Py_None);
        Py_DECREF(code);
        if (value != NULL) *ppos = pos;
        return value;
    }
    case 0x0E: {
        PyObject *text = read_string(c, pos, last, "symbol", name, &pos);
        if (text == NULL) return NULL;
        value = PyObject_CallOneArg(S.Symbol, text);
        Py_DECREF(text);
        if (value != NULL) *ppos = pos;
        return value;
    }
    case 0x0F:
        return decode_code_w_scope(c, ppos, last, name, depth);
    case 0x10:
        if (pos + 4 > last)
            return ctx == CTX_ARRAY ? gm_malformed(pos, "int32 in array is truncated")
                                    : gm_malformed(pos, "int32 %R is truncated", name);
        *ppos = pos + 4;
        return PyLong_FromLong((long)gm_read_i32(buf + pos));
    case 0x11: {
        if (pos + 8 > last) return gm_malformed(pos, "timestamp %R is truncated", name);
        PyObject *inc = PyLong_FromUnsignedLong(gm_read_u32(buf + pos));
        PyObject *time = PyLong_FromUnsignedLong(gm_read_u32(buf + pos + 4));
        if (inc == NULL || time == NULL) {
            value = NULL;
        } else if (S.off_ts_time >= 0 && S.off_ts_inc >= 0) {
            value = gm_new_with_slots(S.Timestamp, S.off_ts_time, time, S.off_ts_inc, inc);
        } else {
            value = PyObject_CallFunctionObjArgs(S.py_ts_from_wire, time, inc, NULL);
        }
        Py_XDECREF(inc);
        Py_XDECREF(time);
        if (value != NULL) *ppos = pos + 8;
        return value;
    }
    case 0x12: {
        if (pos + 8 > last) return gm_malformed(pos, "int64 %R is truncated", name);
        PyObject *number = PyLong_FromLongLong((long long)gm_read_i64(buf + pos));
        if (number == NULL) return NULL;
        value = PyObject_CallOneArg(S.Int64, number);
        Py_DECREF(number);
        if (value != NULL) *ppos = pos + 8;
        return value;
    }
    case 0x13: {
        if (pos + 16 > last) return gm_malformed(pos, "Decimal128 %R is truncated", name);
        PyObject *bid = PyBytes_FromStringAndSize((const char *)buf + pos, 16);
        if (bid == NULL) return NULL;
        value = S.off_dec_bid >= 0 ? gm_new_with_slots(S.Decimal128, S.off_dec_bid, bid, -1, NULL)
                                   : PyObject_CallOneArg(S.py_dec_from_bid, bid);
        Py_DECREF(bid);
        if (value != NULL) *ppos = pos + 16;
        return value;
    }
    case 0xFF:
        return PyObject_CallNoArgs(S.MinKey);
    case 0x7F:
        return PyObject_CallNoArgs(S.MaxKey);
    default: {
        char hex[8];
        snprintf(hex, sizeof hex, "%02x", (unsigned)type);
        if (ctx == CTX_ARRAY) return gm_malformed(nul - 1, "unknown BSON type 0x%s in array", hex);
        return gm_malformed(nul - PyUnicode_GET_LENGTH(name) - 1, "unknown BSON type 0x%s for field %R", hex, name);
    }
    }
}

/* Custom TypeDecoders (a registry with decoders): delegated to decoder.py's _apply_decoders. */
static int apply_decoders(Ctx *c, PyObject *container) {
    PyObject *result = PyObject_CallFunctionObjArgs(S.py_apply_decoders, container, c->decoder_map, NULL);
    if (result == NULL) return -1;
    Py_DECREF(result);
    return 0;
}

/* decode_cursor_reply's cursor.firstBatch / cursor.nextBatch (``pos`` at the array's length): a DocumentBatch
 * over the reply's bytes when the array is well framed and holds only documents, each decoded when it is read.
 * NULL without an exception otherwise: the array is then decoded as usual, which reports what is wrong. */
static PyObject *lazy_batch(Ctx *c, Py_ssize_t *ppos, Py_ssize_t last) {
    const unsigned char *buf = c->buf;
    Py_ssize_t pos = *ppos;
    if (pos + 5 > last) return NULL;
    Py_ssize_t stop = pos + (Py_ssize_t)gm_read_i32(buf + pos);
    if (stop < pos + 5 || stop > last || buf[stop - 1] != 0) return NULL;
    Py_ssize_t array_last = stop - 1, p = pos + 4, count = 0;
    while (p < array_last) { /* the framing only: every element a whole document inside the array */
        if (buf[p] != 0x03) return NULL;
        const unsigned char *nulp = memchr(buf + p + 1, 0, (size_t)(array_last - p - 1));
        if (nulp == NULL) return NULL;
        Py_ssize_t start = nulp - buf + 1;
        if (start + 5 > array_last) return NULL;
        Py_ssize_t end = start + (Py_ssize_t)gm_read_i32(buf + start);
        if (end < start + 5 || end > array_last || buf[end - 1] != 0) return NULL;
        p = end;
        count++;
    }
    if (p != array_last) return NULL;
    PyObject *starts = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (starts == NULL) return NULL;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(starts);
    for (p = pos + 4; p < array_last; out++) {
        Py_ssize_t start = (const unsigned char *)memchr(buf + p + 1, 0, (size_t)(array_last - p - 1)) - buf + 1;
        *out = (int64_t)start;
        p = start + (Py_ssize_t)gm_read_i32(buf + start);
    }
    PyObject *batch = PyObject_CallFunctionObjArgs(S.DocumentBatch, c->data, starts, c->opts, NULL);
    Py_DECREF(starts);
    if (batch != NULL) *ppos = stop;
    return batch;
}

static int name_is(const unsigned char *name, Py_ssize_t size, const char *text) {
    return (size_t)size == strlen(text) && memcmp(name, text, (size_t)size) == 0;
}

/* An element of a cursor reply's top level or of its "cursor" document: the batch stays encoded. */
static PyObject *cursor_reply_value(Ctx *c, unsigned char type, Py_ssize_t *ppos, Py_ssize_t last, PyObject *name,
                                    long depth, Py_ssize_t nul, const unsigned char *raw_name, Py_ssize_t name_size) {
    if (depth == 0 && type == 0x03 && name_is(raw_name, name_size, "cursor")) {
        c->in_cursor = 1;
        PyObject *value = decode_value(c, type, ppos, last, name, depth, CTX_DOC, nul);
        c->in_cursor = 0;
        return value;
    }
    if (depth == 1 && c->in_cursor && type == 0x04 &&
        (name_is(raw_name, name_size, "firstBatch") || name_is(raw_name, name_size, "nextBatch"))) {
        PyObject *batch = lazy_batch(c, ppos, last);
        if (batch != NULL || PyErr_Occurred()) return batch;
    }
    return decode_value(c, type, ppos, last, name, depth, CTX_DOC, nul);
}

PyObject *gm_decode_doc(Ctx *c, Py_ssize_t pos, Py_ssize_t end, long depth) {
    if (depth > S.max_depth) return gm_malformed(pos, "documents nest deeper than %ld levels", S.max_depth);
    PyObject *doc;
    int is_dict = 1;
    if (c->doc_kind == DOC_DICT) {
        doc = PyDict_New();
    } else if (c->doc_kind == DOC_RAW) {
        if (depth >= 0) { /* RawBSONDocument: stays raw, decoded lazily */
            PyObject *raw = PyBytes_FromStringAndSize((const char *)c->buf + pos, end - pos);
            if (raw == NULL) return NULL;
            PyObject *value = PyObject_CallFunctionObjArgs(c->document_class, raw, c->opts, NULL);
            Py_DECREF(raw);
            return value;
        }
        doc = PyDict_New(); /* depth -1: a RawBSONDocument inflating its own top level */
    } else {
        doc = PyObject_CallNoArgs(c->document_class);
        is_dict = 0;
    }
    if (doc == NULL) return NULL;
    const unsigned char *buf = c->buf;
    Py_ssize_t last = end - 1;
    pos += 4;
    while (pos < last) {
        unsigned char type = buf[pos];
        const unsigned char *nulp = memchr(buf + pos + 1, 0, (size_t)(last - pos - 1));
        if (nulp == NULL) {
            gm_malformed(pos + 1, "element name is not NUL-terminated");
            goto error;
        }
        Py_ssize_t nul = nulp - buf;
        PyObject *name = element_name(buf + pos + 1, nul - pos - 1);
        if (name == NULL) {
            utf8_error(pos + 1, "element name");
            goto error;
        }
        Py_ssize_t name_start = pos + 1;
        pos = nul + 1;
        PyObject *value;
        if (c->cursor_reply && depth <= 1) {
            value = cursor_reply_value(c, type, &pos, last, name, depth, nul, buf + name_start, nul - name_start);
        } else {
            value = decode_value(c, type, &pos, last, name, depth, CTX_DOC, nul);
        }
        if (value == NULL) {
            Py_DECREF(name);
            goto error;
        }
        int rc = is_dict ? PyDict_SetItem(doc, name, value) : PyObject_SetItem(doc, name, value);
        Py_DECREF(name);
        Py_DECREF(value);
        if (rc < 0) goto error;
    }
    if (pos != last) {
        gm_malformed(pos, "element runs past the end of its document");
        goto error;
    }
    if (c->decoder_map != NULL && apply_decoders(c, doc) < 0) goto error;
    if (depth > 0) { /* an embedded document may be a DBRef; the top level never is */
        int has_ref = is_dict && PyDict_CheckExact(doc) ? PyDict_Contains(doc, S.s_ref)
                                                        : PySequence_Contains(doc, S.s_ref);
        if (has_ref < 0) goto error;
        if (has_ref) {
            PyObject *result = PyObject_CallOneArg(S.py_maybe_dbref, doc);
            Py_DECREF(doc);
            return result;
        }
    }
    return doc;
error:
    Py_DECREF(doc);
    return NULL;
}

static PyObject *decode_arr(Ctx *c, Py_ssize_t pos, Py_ssize_t end, long depth) {
    if (depth > S.max_depth) return gm_malformed(pos, "documents nest deeper than %ld levels", S.max_depth);
    PyObject *values = PyList_New(0);
    if (values == NULL) return NULL;
    const unsigned char *buf = c->buf;
    Py_ssize_t last = end - 1;
    pos += 4;
    while (pos < last) {
        unsigned char type = buf[pos];
        const unsigned char *nulp = memchr(buf + pos + 1, 0, (size_t)(last - pos - 1));
        if (nulp == NULL) {
            gm_malformed(pos + 1, "array index is not NUL-terminated");
            goto error;
        }
        Py_ssize_t nul = nulp - buf;
        pos = nul + 1;
        PyObject *value = decode_value(c, type, &pos, last, S.s_array_element, depth, CTX_ARRAY, nul);
        if (value == NULL) goto error;
        int rc = PyList_Append(values, value);
        Py_DECREF(value);
        if (rc < 0) goto error;
    }
    if (pos != last) {
        gm_malformed(pos, "element runs past the end of its array");
        goto error;
    }
    if (c->decoder_map != NULL && apply_decoders(c, values) < 0) goto error;
    return values;
error:
    Py_DECREF(values);
    return NULL;
}

/* The datetime C API is a per-file static: this file imports its own. */
int gm_decoder_datetime_init(void) {
    PyDateTime_IMPORT;
    return PyDateTimeAPI == NULL ? -1 : 0;
}
