/* The layout checks of a stored message record (docs/PROTOCOL.md 5.2), shared by the C
 * decoders: protocol/_message.c (MessageExt objects) and spark_sink/_records.c (Arrow
 * buffers); server/store/_units.c reads its consume-queue units with be32 / be64. A record passes ``stored_record_lengths`` exactly when protocol/message.py's
 * ``decode_message`` reads it as a v1 record with IPv4 hosts and no compressed body,
 * and its topic and properties are strict UTF-8 (that code reads "replace"d text); any
 * other record is left to message.py. */
#ifndef AIOROCKETMQ_STORED_RECORD_H
#define AIOROCKETMQ_STORED_RECORD_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RECORD_MAGIC_V1 ((int32_t)0xDAA320A7)
#define RECORD_HEAD 88  /* TOTALSIZE .. BODYLEN of a v1 record with IPv4 hosts */
#define RECORD_MIN 91   /* + topic length byte + properties length short */
/* COMPRESSED, BORNHOST_V6, STOREHOSTADDRESS_V6 */
#define RECORD_NOT_READ_FLAGS (0x1 | 0x10 | 0x20)

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)((uint64_t)(uint32_t)be32(p) << 32 | (uint32_t)be32(p + 4));
}

/* Strict UTF-8, as Python's decoder: no overlong forms, no surrogates, <= U+10FFFF. */
static inline int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            while (i + 8 <= n) {  /* ASCII, 8 bytes at a time */
                uint64_t w;
                memcpy(&w, s + i, 8);
                if (w & 0x8080808080808080ULL) break;
                i += 8;
            }
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 > 0x9F) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

typedef struct {
    Py_ssize_t total, body_len, topic_len, props_len;
    const unsigned char *body, *topic, *props;
} StoredRecord;

/* Whether the record at ``r`` (``left`` bytes to the end of its body) is one the C
 * decoders read; fills ``rec`` when it is. */
static inline int stored_record_lengths(const unsigned char *r, Py_ssize_t left,
                                        StoredRecord *rec) {
    if (left < RECORD_MIN) return 0;
    Py_ssize_t total = be32(r);
    if (total < RECORD_MIN || total > left) return 0;
    if (be32(r + 4) != RECORD_MAGIC_V1 || (be32(r + 36) & RECORD_NOT_READ_FLAGS)) return 0;
    Py_ssize_t body_len = be32(r + 84);
    if (body_len < 0 || RECORD_HEAD + body_len + 1 > total) return 0;
    Py_ssize_t topic_len = r[RECORD_HEAD + body_len];
    if (topic_len > 127 || RECORD_HEAD + body_len + 1 + topic_len + 2 > total) return 0;
    const unsigned char *pl = r + RECORD_HEAD + body_len + 1 + topic_len;
    Py_ssize_t props_len = (int16_t)((uint16_t)pl[0] << 8 | pl[1]);
    if (props_len < 0 || RECORD_MIN + body_len + topic_len + props_len != total) return 0;
    if (!utf8_ok(r + RECORD_HEAD + body_len + 1, topic_len) || !utf8_ok(pl + 2, props_len))
        return 0;
    rec->total = total;
    rec->body_len = body_len;
    rec->topic_len = topic_len;
    rec->props_len = props_len;
    rec->body = r + RECORD_HEAD;
    rec->topic = r + RECORD_HEAD + body_len + 1;
    rec->props = pl + 2;
    return 1;
}

/* The next pair of a record's properties as ``decode_properties`` reads them: segments
 * split on \x02, key and value on the segment's first \x01, segments with an empty key
 * or value skipped. ``*pos`` starts at 0; returns 0 when there are no more. */
static inline int next_property(const unsigned char *s, Py_ssize_t len, Py_ssize_t *pos,
                                const unsigned char **k, Py_ssize_t *kl,
                                const unsigned char **v, Py_ssize_t *vl) {
    while (len && *pos <= len) {
        const unsigned char *seg = s + *pos;
        const unsigned char *stop = memchr(seg, 0x02, (size_t)(len - *pos));
        Py_ssize_t sl = stop ? stop - seg : len - *pos;
        *pos += sl + 1;
        const unsigned char *nv = sl ? memchr(seg, 0x01, (size_t)sl) : NULL;
        if (nv && nv > seg && nv < seg + sl - 1) {
            *k = seg;
            *kl = nv - seg;
            *v = nv + 1;
            *vl = seg + sl - (nv + 1);
            return 1;
        }
    }
    return 0;
}

/* "a.b.c.d:port" of a record's IPv4 host (4 IP bytes, then the port as a signed int32),
 * as message.py's ``_host_str``; returns its length. */
#define HOST_TEXT_MAX 32  /* "255.255.255.255:-2147483648" is 27 */
static inline int host_text(const unsigned char *ip_port, char out[HOST_TEXT_MAX]) {
    return snprintf(out, HOST_TEXT_MAX, "%u.%u.%u.%u:%d", ip_port[0], ip_port[1], ip_port[2],
                    ip_port[3], (int)be32(ip_port + 4));
}

/* The offset message id of a record: store IP and port, then the commit log offset, as
 * 32 upper-case hex digits (``MessageDecoder.createMessageId``). */
static inline void offset_msg_id(const unsigned char *r, char hex[32]) {
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 0; i < 8; i++) {
        hex[2 * i] = digits[r[64 + i] >> 4];
        hex[2 * i + 1] = digits[r[64 + i] & 15];
        hex[16 + 2 * i] = digits[r[28 + i] >> 4];
        hex[17 + 2 * i] = digits[r[28 + i] & 15];
    }
}

#endif
