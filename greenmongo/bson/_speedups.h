/* greenmongo.bson._speedups: the optional C accelerator for the BSON codec.
 *
 * It mirrors greenmongo/bson/decoder.py, encoder.py and codec.py exactly: same values, same types,
 * same errors (message texts included). The Python modules hand it their classes and their pure
 * functions at import (the _init_* calls), so anything this file does not handle is delegated to
 * the Python code, element by element: correctness first, speed for the common case.
 */
#ifndef GREENMONGO_SPEEDUPS_H
#define GREENMONGO_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Everything the C code needs from the Python side, filled in by _init_decoder/_init_encoder/_init_codec.
 * All references are strong and live for the life of the process (the module is never unloaded). */
typedef struct {
    int decoder_ready, encoder_ready, codec_ready;
    long max_depth;

    /* BSON value classes */
    PyObject *ObjectId, *Int64, *Timestamp, *Binary, *Decimal128, *Regex, *Code, *DBRef, *MinKey, *MaxKey;
    PyObject *Symbol, *DBPointer, *UNDEFINED, *DatetimeMS, *UUID, *RePattern;
    PyObject *CodecOptions, *DEFAULT_CODEC_OPTIONS, *MappingABC, *DocumentBatch;

    /* errors */
    PyObject *Malformed, *InvalidBSON, *InvalidDocument, *StructError, *decode_catch; /* tuple */

    /* pure-Python fallbacks */
    PyObject *py_decode_document, *py_apply_decoders, *py_maybe_dbref;
    PyObject *py_encode_document, *py_element, *py_decode_one;
    PyObject *py_oid_from_bytes, *py_ts_from_wire, *py_dec_from_bid, *py_code_from_wire;
    unsigned char regex_flag_bits[128]; /* BSON regex letter -> Python re flag bit (decoding) */
    int regex_flags_ok;

    /* CodecOptions tuple indexes */
    Py_ssize_t opt_document_class, opt_tz_aware, opt_uuid_representation, opt_unicode_handler, opt_tzinfo,
        opt_type_registry, opt_datetime_conversion, opt_min_size;

    /* Instance slot offsets (-1: unknown, go through Python instead) */
    Py_ssize_t off_oid, off_ts_time, off_ts_inc, off_dec_bid, off_code_scope, off_regex_pattern, off_regex_flags;

    /* interned strings */
    PyObject *s_ref, *s_id, *s_raw, *s_items, *s_type_marker, *s_binary_subtype, *s_decoder_map,
        *s_array_element, *s_utcoffset, *s_astimezone, *s_bytes, *s_pattern, *s_flags, *s_as_doc,
        *kw_bytes; /* ("bytes",) */
    PyObject *int_101;
} SpeedupsState;

extern SpeedupsState S;

/* The decoder's per-call view of its CodecOptions (see _speedups_decode_api.c). */
enum { DOC_DICT, DOC_RAW, DOC_OTHER };

typedef struct {
    PyObject *data; /* bytes; the caller keeps it alive */
    const unsigned char *buf;
    PyObject *opts;
    PyObject *document_class;
    int doc_kind;
    int tz_aware;
    PyObject *tzinfo; /* borrowed from opts; NULL for None */
    long uuid_rep;
    long dt_conversion;
    const char *errors;     /* unicode_decode_error_handler; NULL for "strict" */
    PyObject *decoder_map;  /* strong; NULL when the registry has no decoders */
    int cursor_reply;       /* decode_cursor_reply: cursor.firstBatch/nextBatch stay encoded */
    int in_cursor;          /* decoding the reply's top-level "cursor" document */
} Ctx;

PyObject *gm_decode_doc(Ctx *c, Py_ssize_t pos, Py_ssize_t end, long depth);
PyObject *gm_malformed(Py_ssize_t at, const char *fmt, ...);
int gm_decoder_datetime_init(void);

/* _speedups.c helpers */
PyObject *gm_required(PyObject *ns, const char *name);
Py_ssize_t gm_slot_offset(PyObject *cls, const char *attr);
PyObject *gm_new_with_slots(PyObject *cls, Py_ssize_t off1, PyObject *v1, Py_ssize_t off2, PyObject *v2);
int gm_parse_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                  const char *const *names, Py_ssize_t required, Py_ssize_t total, PyObject **out);
int gm_check_options(PyObject *codec_options, PyObject **out); /* borrowed result */
void gm_raise_from_none(PyObject *type, PyObject *message);

/* decoder / encoder entry points and their init */
int gm_init_types(PyObject *ns);
int gm_decoder_init(PyObject *ns);
int gm_encoder_init(PyObject *ns);
int gm_codec_init(PyObject *ns);
PyObject *gm_decode_document(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_decode_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_decode_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_decode_cursor_reply(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_decode_at(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *gm_encode_document(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);
PyObject *gm_encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames);

/* little-endian reads and writes */
static inline int32_t gm_read_i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24));
}
static inline uint32_t gm_read_u32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline int64_t gm_read_i64(const unsigned char *p) {
    return (int64_t)((uint64_t)gm_read_u32(p) | ((uint64_t)gm_read_u32(p + 4) << 32));
}
static inline double gm_read_double(const unsigned char *p) {
    uint64_t bits = (uint64_t)gm_read_u32(p) | ((uint64_t)gm_read_u32(p + 4) << 32);
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}
static inline void gm_write_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static inline void gm_write_u64(unsigned char *p, uint64_t v) {
    gm_write_u32(p, (uint32_t)v);
    gm_write_u32(p + 4, (uint32_t)(v >> 32));
}

/* Days since 1970-01-01 <-> proleptic Gregorian civil date (H. Hinnant's algorithms). */
static inline int64_t gm_days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}
static inline void gm_civil_from_days(int64_t z, int *year, int *month, int *day) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = (unsigned)(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t y = (int64_t)yoe + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    *year = (int)(y + (m <= 2));
    *month = (int)m;
    *day = (int)d;
}

#endif
