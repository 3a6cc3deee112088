/* The capture's per-packet reading path in C: capture records walked in a buffer (pcap records; pcapng Enhanced
 * Packet Blocks), link/IP/TCP parsed, segments assigned to flows in a flow table, and the segments of MQTT flows
 * written out as columns (Arrow's layouts: fixed-width values, int32 offsets and data for binary columns).
 *
 * It is the fast path of mqttaudit.capture.native; the pure-Python modules (pcap, pcapng, link, segments, flows)
 * are its reference and fallback, and every rule here mirrors one there. Whatever this code does not handle (a
 * pcapng block other than an ordinary Enhanced Packet Block, a timestamp that needs arbitrary precision, a corrupt
 * header) it leaves where it stopped, and the Python parser takes that one record or block. The differential tests
 * hold the two to the same output on every input.
 *
 * Nothing here reads files or keeps Python objects per packet. Every read is bounds-checked against the buffer
 * handed in; every buffer this code grows is bounded by what one call is handed (the flow table by the flows seen,
 * which the Python path keeps too).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Why a record holds no segment: the order of mqttaudit.capture.link.Skip (checked by the tests). */
enum {
    SK_UNSUPPORTED_LINKTYPE,
    SK_TRUNCATED_LINK,
    SK_NOT_IP,
    SK_TRUNCATED_IP,
    SK_BAD_IP,
    SK_FRAGMENT,
    SK_FIRST_FRAGMENT,
    SK_NOT_TCP,
    SK_ENCRYPTED,
    SK_TRUNCATED_TCP,
    SK_BAD_TCP,
    SK_TRUNCATED_PAYLOAD,
    SK_NOT_BROKER, /* a segment of a flow on no broker port */
    SK_COUNT
};

static const char *const SKIP_NAMES[SK_COUNT] = {
    "unsupported-linktype", "truncated-link-header", "not-ip", "truncated-ip-header", "bad-ip-header",
    "ip-fragment", "first-ip-fragment", "not-tcp", "ipsec-esp", "truncated-tcp-header", "bad-tcp-header",
    "truncated-tcp-payload", "not a broker port",
};

#define PCAP_RECORD_HEADER 16
#define PCAPNG_SECTION_HEADER 0x0A0D0D0Au
#define PCAPNG_ENHANCED_PACKET 6u
#define PCAPNG_MAX_BLOCK (16u * 1024u * 1024u)

/* ---- growable output buffers ---------------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        if (cap > ((size_t)PY_SSIZE_T_MAX) / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *value, size_t size) {
    if (size == 0) /* nothing to copy (and the buffer may not be allocated yet: memcpy takes no NULL) */
        return 0;
    if (buf_reserve(b, size) < 0)
        return -1;
    memcpy(b->data + b->len, value, size);
    b->len += size;
    return 0;
}

static void buf_free(Buf *b) {
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static PyObject *buf_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len); }

/* A binary column: int32 offsets (one more than its values) and the values' bytes. */
typedef struct {
    Buf offsets, values;
} Binary;

static int binary_put(Binary *c, const uint8_t *value, size_t size) {
    if (c->values.len + size > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column of one batch holds more than 2 GiB");
        return -1;
    }
    if (buf_put(&c->values, value, size) < 0)
        return -1;
    int32_t end = (int32_t)c->values.len;
    return buf_put(&c->offsets, &end, sizeof end);
}

static int binary_start(Binary *c) {
    int32_t zero = 0;
    c->offsets.len = c->values.len = 0;
    return buf_put(&c->offsets, &zero, sizeof zero);
}

/* ---- flows ------------------------------------------------------------------------------------------------ */

typedef struct {
    uint8_t ip_a[16], ip_b[16]; /* the endpoints in their fixed order: (ip, port) of a <= (ip, port) of b */
    uint16_t port_a, port_b;
    uint8_t iplen;
    uint8_t broker;
    int64_t frames, bytes; /* a flow left out: its segments and payload bytes */
    int32_t shown;         /* a flow left out: the service port a SYN or SYN-ACK showed, -1 until one did */
} Flow;

typedef struct {
    PyObject_HEAD
    uint8_t ports[8192]; /* broker ports, one bit each */
    Flow *flows;
    size_t nflows, flows_cap;
    int32_t *slots; /* open addressing: flow index + 1, 0 for an empty slot */
    size_t nslots;
    int64_t skipped[SK_COUNT];
    int64_t records;
    int ready; /* set up by __init__, which runs once: a second call would keep the flow table of the first */
    /* the columns of the segments kept since the last take() */
    Py_ssize_t rows;
    Buf record, time_ns, flow, src_port, dst_port, seq, ack, flags;
    Binary src_ip, dst_ip, payload;
} Scanner;

static uint64_t key_hash(const uint8_t *a, uint16_t pa, const uint8_t *b, uint16_t pb, uint8_t iplen) {
    uint64_t h = 1469598103934665603ull ^ iplen;
    for (int i = 0; i < iplen; i++)
        h = (h ^ a[i]) * 1099511628211ull;
    for (int i = 0; i < iplen; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    h = (h ^ ((uint64_t)pa << 16 | pb)) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int grow_slots(Scanner *s) {
    size_t nslots = s->nslots ? s->nslots * 2 : 1024;
    int32_t *slots = PyMem_Calloc(nslots, sizeof *slots);
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < s->nflows; i++) {
        Flow *f = &s->flows[i];
        size_t at = key_hash(f->ip_a, f->port_a, f->ip_b, f->port_b, f->iplen) & (nslots - 1);
        while (slots[at])
            at = (at + 1) & (nslots - 1);
        slots[at] = (int32_t)(i + 1);
    }
    PyMem_Free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

static inline int is_broker_port(const Scanner *s, uint16_t port) { return s->ports[port >> 3] >> (port & 7) & 1; }

/* The index of the flow of (src, dst), created when new; *side is 0 when src is the flow's first endpoint. */
static Py_ssize_t flow_of(Scanner *s, const uint8_t *src, uint16_t sport, const uint8_t *dst, uint16_t dport,
                          uint8_t iplen, int *side) {
    int order = memcmp(src, dst, iplen);
    const uint8_t *a = src, *b = dst;
    uint16_t pa = sport, pb = dport;
    *side = 0;
    if (order > 0 || (order == 0 && sport > dport)) {
        a = dst, b = src, pa = dport, pb = sport;
        *side = 1;
    }
    if ((s->nflows + 1) * 2 > s->nslots && grow_slots(s) < 0)
        return -1;
    size_t mask = s->nslots - 1;
    size_t at = key_hash(a, pa, b, pb, iplen) & mask;
    while (s->slots[at]) {
        Flow *f = &s->flows[s->slots[at] - 1];
        if (f->iplen == iplen && f->port_a == pa && f->port_b == pb && memcmp(f->ip_a, a, iplen) == 0 &&
            memcmp(f->ip_b, b, iplen) == 0)
            return s->slots[at] - 1;
        at = (at + 1) & mask;
    }
    if (s->nflows >= INT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "more than 2**31 flows in one chunk");
        return -1;
    }
    if (s->nflows == s->flows_cap) {
        size_t cap = s->flows_cap ? s->flows_cap * 2 : 256;
        Flow *flows = PyMem_Realloc(s->flows, cap * sizeof *flows);
        if (flows == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->flows = flows;
        s->flows_cap = cap;
    }
    Flow *f = &s->flows[s->nflows];
    memset(f, 0, sizeof *f);
    memcpy(f->ip_a, a, iplen);
    memcpy(f->ip_b, b, iplen);
    f->port_a = pa;
    f->port_b = pb;
    f->iplen = iplen;
    f->broker = is_broker_port(s, pa) || is_broker_port(s, pb);
    f->shown = -1;
    s->slots[at] = (int32_t)(s->nflows + 1);
    return (Py_ssize_t)s->nflows++;
}

/* ---- link, IP, TCP (mqttaudit.capture.link.network_layer and segments.decode_segment) ---------------------- */

static int ethertype(const uint8_t *d, size_t size, size_t pos, unsigned type, size_t *ip, int *version) {
    while (type == 0x8100 || type == 0x88A8 || type == 0x9100 || type == 0x9200 || type == 0x9300) {
        if (size < pos + 4)
            return SK_TRUNCATED_LINK;
        type = (unsigned)d[pos + 2] << 8 | d[pos + 3];
        pos += 4;
    }
    *ip = pos;
    if (type == 0x0800) {
        *version = 4;
        return -1;
    }
    if (type == 0x86DD) {
        *version = 6;
        return -1;
    }
    return SK_NOT_IP;
}

static int network_layer(long linktype, const uint8_t *d, size_t size, size_t *ip, int *version) {
    switch (linktype) {
    case 1: /* Ethernet */
        if (size < 14)
            return SK_TRUNCATED_LINK;
        return ethertype(d, size, 14, (unsigned)d[12] << 8 | d[13], ip, version);
    case 113: /* Linux SLL */
        if (size < 16)
            return SK_TRUNCATED_LINK;
        return ethertype(d, size, 16, (unsigned)d[14] << 8 | d[15], ip, version);
    case 276: /* Linux SLL2 */
        if (size < 20)
            return SK_TRUNCATED_LINK;
        return ethertype(d, size, 20, (unsigned)d[0] << 8 | d[1], ip, version);
    case 101:
    case 12:
    case 14: /* raw IP */
        *ip = 0, *version = 0;
        return -1;
    case 228:
        *ip = 0, *version = 4;
        return -1;
    case 229:
        *ip = 0, *version = 6;
        return -1;
    case 0:
    case 108: { /* BSD loopback, the family in either byte order */
        if (size < 4)
            return SK_TRUNCATED_LINK;
        uint32_t family = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
        if (family > 0xFFFF)
            family = (uint32_t)d[3] | (uint32_t)d[2] << 8 | (uint32_t)d[1] << 16 | (uint32_t)d[0] << 24;
        *ip = 4;
        if (family == 2) {
            *version = 4;
            return -1;
        }
        if (family == 10 || family == 23 || family == 24 || family == 28 || family == 30) {
            *version = 6;
            return -1;
        }
        return SK_NOT_IP;
    }
    default:
        return SK_UNSUPPORTED_LINKTYPE;
    }
}

typedef struct {
    const uint8_t *src, *dst;
    uint8_t iplen;
    uint16_t sport, dport, flags;
    uint32_t seq, ack;
    size_t payload, end;
} Segment;

static inline int is_ipv6_extension(unsigned h) {
    return h == 0 || h == 43 || h == 60 || h == 135 || h == 139 || h == 140 || h == 44 || h == 51;
}

/* -1 and *seg filled for a TCP segment, else the reason there is none. */
static int decode_segment(long linktype, const uint8_t *d, size_t size, Segment *seg) {
    size_t pos, end, tcp;
    int version;
    int skip = network_layer(linktype, d, size, &pos, &version);
    if (skip >= 0)
        return skip;
    if (size < pos + 1)
        return SK_TRUNCATED_IP;
    int found = d[pos] >> 4;
    if (version && found != version)
        return SK_BAD_IP;
    if (found == 4) {
        if (size < pos + 20)
            return SK_TRUNCATED_IP;
        size_t header = (size_t)(d[pos] & 0x0F) * 4;
        if (header < 20)
            return SK_BAD_IP;
        if (size < pos + header)
            return SK_TRUNCATED_IP;
        unsigned fragment = (unsigned)d[pos + 6] << 8 | d[pos + 7];
        if (fragment & 0x1FFF)
            return SK_FRAGMENT;
        if (d[pos + 9] != 6)
            return SK_NOT_TCP;
        if (fragment & 0x2000)
            return SK_FIRST_FRAGMENT;
        size_t total = (size_t)d[pos + 2] << 8 | d[pos + 3];
        if (total && total < header)
            return SK_BAD_IP;
        end = total ? pos + total : size;
        seg->src = d + pos + 12;
        seg->dst = d + pos + 16;
        seg->iplen = 4;
        tcp = pos + header;
    } else if (found == 6) {
        if (size < pos + 40)
            return SK_TRUNCATED_IP;
        size_t length = (size_t)d[pos + 4] << 8 | d[pos + 5];
        end = length ? pos + 40 + length : size;
        seg->src = d + pos + 8;
        seg->dst = d + pos + 24;
        seg->iplen = 16;
        tcp = pos + 40;
        unsigned next = d[pos + 6];
        int first_fragment = 0;
        while (next != 6) {
            if (is_ipv6_extension(next)) {
                size_t step;
                if (size < tcp + 8)
                    return SK_TRUNCATED_IP;
                if (next == 44) {
                    unsigned fragment = (unsigned)d[tcp + 2] << 8 | d[tcp + 3];
                    if (fragment & 0xFFF8)
                        return SK_FRAGMENT;
                    first_fragment |= fragment & 1;
                    step = 8;
                } else if (next == 51) {
                    step = ((size_t)d[tcp + 1] + 2) * 4;
                } else {
                    step = ((size_t)d[tcp + 1] + 1) * 8;
                }
                next = d[tcp];
                tcp += step;
                if (tcp > end)
                    return SK_BAD_IP;
            } else if (next == 50) {
                return SK_ENCRYPTED;
            } else {
                return SK_NOT_TCP;
            }
        }
        if (first_fragment)
            return SK_FIRST_FRAGMENT;
    } else {
        return SK_BAD_IP;
    }
    if (end < tcp + 20)
        return SK_BAD_TCP;
    if (size < tcp + 20)
        return SK_TRUNCATED_TCP;
    size_t offset = (size_t)(d[tcp + 12] >> 4) * 4;
    if (offset < 20 || tcp + offset > end)
        return SK_BAD_TCP;
    if (size < tcp + offset)
        return SK_TRUNCATED_TCP;
    if (end > size)
        return SK_TRUNCATED_PAYLOAD;
    seg->sport = (uint16_t)(d[tcp] << 8 | d[tcp + 1]);
    seg->dport = (uint16_t)(d[tcp + 2] << 8 | d[tcp + 3]);
    seg->seq = (uint32_t)d[tcp + 4] << 24 | (uint32_t)d[tcp + 5] << 16 | (uint32_t)d[tcp + 6] << 8 | d[tcp + 7];
    seg->ack = (uint32_t)d[tcp + 8] << 24 | (uint32_t)d[tcp + 9] << 16 | (uint32_t)d[tcp + 10] << 8 | d[tcp + 11];
    seg->flags = (uint16_t)((d[tcp + 12] & 1) << 8 | d[tcp + 13]);
    seg->payload = tcp + offset;
    seg->end = end;
    return -1;
}

/* One captured record: decoded, counted, and kept as a row when its flow is an MQTT flow. */
static int take_record(Scanner *s, int64_t time_ns, long linktype, const uint8_t *d, size_t size, int64_t index) {
    Segment seg;
    s->records++;
    int skip = decode_segment(linktype, d, size, &seg);
    if (skip >= 0) {
        s->skipped[skip]++;
        return 0;
    }
    int side;
    Py_ssize_t at = flow_of(s, seg.src, seg.sport, seg.dst, seg.dport, seg.iplen, &side);
    if (at < 0)
        return -1;
    Flow *f = &s->flows[at];
    size_t payload = seg.end - seg.payload;
    if (!f->broker) {
        s->skipped[SK_NOT_BROKER]++;
        f->frames++;
        f->bytes += (int64_t)payload;
        if (f->shown < 0 && (seg.flags & 0x002))
            f->shown = (seg.flags & 0x010) ? seg.sport : seg.dport;
        return 0;
    }
    int32_t flow = (int32_t)at, sport = seg.sport, dport = seg.dport, flags = seg.flags;
    int64_t sq = seg.seq, ak = seg.ack;
    if (buf_put(&s->record, &index, 8) < 0 || buf_put(&s->time_ns, &time_ns, 8) < 0 ||
        buf_put(&s->flow, &flow, 4) < 0 || binary_put(&s->src_ip, seg.src, seg.iplen) < 0 ||
        buf_put(&s->src_port, &sport, 4) < 0 || binary_put(&s->dst_ip, seg.dst, seg.iplen) < 0 ||
        buf_put(&s->dst_port, &dport, 4) < 0 || buf_put(&s->seq, &sq, 8) < 0 || buf_put(&s->ack, &ak, 8) < 0 ||
        buf_put(&s->flags, &flags, 4) < 0 || binary_put(&s->payload, d + seg.payload, payload) < 0)
        return -1;
    s->rows++;
    return 0;
}

/* ---- the Scanner type --------------------------------------------------------------------------------------- */

static int start_columns(Scanner *s) {
    s->rows = 0;
    s->record.len = s->time_ns.len = s->flow.len = s->src_port.len = s->dst_port.len = 0;
    s->seq.len = s->ack.len = s->flags.len = 0;
    if (binary_start(&s->src_ip) < 0 || binary_start(&s->dst_ip) < 0 || binary_start(&s->payload) < 0)
        return -1;
    return 0;
}

static int Scanner_init(Scanner *s, PyObject *args, PyObject *kwds) {
    static char *names[] = {"broker_ports", NULL};
    PyObject *ports;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &ports))
        return -1;
    if (s->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a Scanner is set up once: make a new one for another chunk");
        return -1;
    }
    PyObject *it = PyObject_GetIter(ports);
    if (it == NULL)
        return -1;
    memset(s->ports, 0, sizeof s->ports);
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        long port = PyLong_AsLong(item);
        Py_DECREF(item);
        if (port == -1 && PyErr_Occurred())
            break;
        if (port < 0 || port > 65535) {
            PyErr_Format(PyExc_ValueError, "port %ld is not a TCP port", port);
            break;
        }
        s->ports[port >> 3] |= (uint8_t)(1u << (port & 7));
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    if (start_columns(s) < 0)
        return -1;
    s->ready = 1;
    return 0;
}

static void Scanner_dealloc(Scanner *s) {
    PyMem_Free(s->flows);
    PyMem_Free(s->slots);
    Buf *bufs[] = {&s->record, &s->time_ns, &s->flow, &s->src_port, &s->dst_port, &s->seq, &s->ack, &s->flags,
                   &s->src_ip.offsets, &s->src_ip.values, &s->dst_ip.offsets, &s->dst_ip.values,
                   &s->payload.offsets, &s->payload.values};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        buf_free(bufs[i]);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static inline uint32_t u32(const uint8_t *p, int little) {
    return little ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
                  : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

PyDoc_STRVAR(pcap_doc, "pcap(buf, pos, little, multiplier, linktype, limit, index) -> (pos, records)\n\n"
                       "Walks the whole pcap records of buf from pos; stops before one that is not wholly in buf "
                       "or declares more than limit captured bytes.");

static PyObject *Scanner_pcap(Scanner *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int little;
    long long multiplier, limit, index;
    long linktype;
    if (!PyArg_ParseTuple(args, "y*npLlLL", &view, &pos, &little, &multiplier, &linktype, &limit, &index))
        return NULL;
    const uint8_t *d = view.buf;
    Py_ssize_t size = view.len, start = index;
    int failed = 0;
    if (pos < 0)
        pos = size;
    while (pos + PCAP_RECORD_HEADER <= size) {
        const uint8_t *h = d + pos;
        uint32_t seconds = u32(h, little), fraction = u32(h + 4, little), caplen = u32(h + 8, little);
        if ((long long)caplen > limit || (Py_ssize_t)caplen > size - pos - PCAP_RECORD_HEADER)
            break;
        int64_t time_ns = (int64_t)seconds * 1000000000 + (int64_t)fraction * multiplier;
        if (take_record(s, time_ns, linktype, h + PCAP_RECORD_HEADER, caplen, index) < 0) {
            failed = 1;
            break;
        }
        index++;
        pos += PCAP_RECORD_HEADER + caplen;
    }
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return Py_BuildValue("nL", pos, (long long)(index - start));
}

PyDoc_STRVAR(pcapng_doc,
             "pcapng(buf, pos, little, scales, index) -> (pos, records)\n\n"
             "Walks the ordinary Enhanced Packet Blocks of buf from pos (scales: per interface (linktype, "
             "multiplier, divisor, offset_ns), or None for one this code leaves to Python); stops before any other "
             "block, one not wholly in buf, or one that fails a check.");

static PyObject *Scanner_pcapng(Scanner *s, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos;
    int little;
    PyObject *scales;
    long long index;
    if (!PyArg_ParseTuple(args, "y*npO!L", &view, &pos, &little, &PyTuple_Type, &scales, &index))
        return NULL;
    Py_ssize_t ninterfaces = PyTuple_GET_SIZE(scales);
    long long start = index;
    int failed = 0;
    struct {
        long linktype;
        long long multiplier, divisor, offset_ns;
        int ok;
    } *table = PyMem_Calloc((size_t)ninterfaces + 1, sizeof *table);
    if (table == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < ninterfaces; i++) {
        PyObject *entry = PyTuple_GET_ITEM(scales, i);
        if (entry == Py_None)
            continue;
        if (!PyArg_ParseTuple(entry, "lLLL", &table[i].linktype, &table[i].multiplier, &table[i].divisor,
                              &table[i].offset_ns) ||
            table[i].multiplier <= 0 || table[i].divisor <= 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a scale's multiplier and divisor are positive");
            failed = 1;
            break;
        }
        table[i].ok = 1;
    }
    const uint8_t *d = view.buf;
    Py_ssize_t size = view.len;
    if (pos < 0)
        pos = size;
    while (!failed && pos + 32 <= size) {
        const uint8_t *h = d + pos;
        uint32_t kind = u32(h, little), length = u32(h + 4, little);
        if (kind != PCAPNG_ENHANCED_PACKET || length < 32 || (length & 3) || length > PCAPNG_MAX_BLOCK ||
            (Py_ssize_t)length > size - pos)
            break;
        uint32_t interface = u32(h + 8, little), high = u32(h + 12, little), low = u32(h + 16, little);
        uint32_t caplen = u32(h + 20, little);
        if (u32(h + length - 4, little) != length || caplen > length - 32 || interface >= (uint64_t)ninterfaces ||
            !table[interface].ok)
            break;
        __int128 units = (__int128)((uint64_t)high << 32 | low);
        __int128 time = units * table[interface].multiplier / table[interface].divisor + table[interface].offset_ns;
        if (time < INT64_MIN || time > INT64_MAX)
            break;
        if (take_record(s, (int64_t)time, table[interface].linktype, h + 28, caplen, index) < 0) {
            failed = 1;
            break;
        }
        index++;
        pos += length;
    }
    PyMem_Free(table);
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    return Py_BuildValue("nL", pos, index - start);
}

PyDoc_STRVAR(record_doc, "record(time_ns, linktype, data, index)\n\nOne record the Python parser read.");

static PyObject *Scanner_record(Scanner *s, PyObject *args) {
    long long time_ns, index;
    long linktype;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "Lly*L", &time_ns, &linktype, &view, &index))
        return NULL;
    int failed = take_record(s, time_ns, linktype, view.buf, (size_t)view.len, index) < 0;
    PyBuffer_Release(&view);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(take_doc,
             "take() -> (rows, record, time_ns, flow, src_ip_offsets, src_ip, src_port, dst_ip_offsets, dst_ip, "
             "dst_port, seq, ack, flags, payload_offsets, payload)\n\n"
             "The columns of the segments kept since the last call, as bytes in Arrow's layouts; starts anew.");

static PyObject *Scanner_take(Scanner *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = Py_BuildValue(
        "nNNNNNNNNNNNNNN", s->rows, buf_bytes(&s->record), buf_bytes(&s->time_ns), buf_bytes(&s->flow),
        buf_bytes(&s->src_ip.offsets), buf_bytes(&s->src_ip.values), buf_bytes(&s->src_port),
        buf_bytes(&s->dst_ip.offsets), buf_bytes(&s->dst_ip.values), buf_bytes(&s->dst_port), buf_bytes(&s->seq),
        buf_bytes(&s->ack), buf_bytes(&s->flags), buf_bytes(&s->payload.offsets), buf_bytes(&s->payload.values));
    if (out == NULL || start_columns(s) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(flows_doc, "flows(start) -> [(ip_a, port_a, ip_b, port_b, broker, frames, bytes, shown), ...]\n\n"
                        "The flows from index start on, in the order they were first seen.");

static PyObject *Scanner_flows(Scanner *s, PyObject *args) {
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "n", &start))
        return NULL;
    if (start < 0)
        start = 0;
    PyObject *out = PyList_New(0);
    for (size_t i = (size_t)start; out != NULL && i < s->nflows; i++) {
        Flow *f = &s->flows[i];
        PyObject *item = Py_BuildValue("y#iy#iOLLi", f->ip_a, (Py_ssize_t)f->iplen, f->port_a, f->ip_b,
                                       (Py_ssize_t)f->iplen, f->port_b, f->broker ? Py_True : Py_False,
                                       (long long)f->frames, (long long)f->bytes, f->shown);
        if (item == NULL || PyList_Append(out, item) < 0)
            Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

PyDoc_STRVAR(counts_doc, "counts() -> (records, {reason: records skipped})");

static PyObject *Scanner_counts(Scanner *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *skipped = PyDict_New();
    for (int i = 0; skipped != NULL && i < SK_COUNT; i++) {
        if (!s->skipped[i])
            continue;
        PyObject *count = PyLong_FromLongLong(s->skipped[i]);
        if (count == NULL || PyDict_SetItemString(skipped, SKIP_NAMES[i], count) < 0)
            Py_CLEAR(skipped);
        Py_XDECREF(count);
    }
    if (skipped == NULL)
        return NULL;
    return Py_BuildValue("LN", (long long)s->records, skipped);
}

static PyMethodDef Scanner_methods[] = {
    {"pcap", (PyCFunction)Scanner_pcap, METH_VARARGS, pcap_doc},
    {"pcapng", (PyCFunction)Scanner_pcapng, METH_VARARGS, pcapng_doc},
    {"record", (PyCFunction)Scanner_record, METH_VARARGS, record_doc},
    {"take", (PyCFunction)Scanner_take, METH_NOARGS, take_doc},
    {"flows", (PyCFunction)Scanner_flows, METH_VARARGS, flows_doc},
    {"counts", (PyCFunction)Scanner_counts, METH_NOARGS, counts_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mqttaudit.capture._native.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Scanner(broker_ports): reads the records of one chunk into columns of MQTT segments."),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The capture's per-packet reading path in C (see mqttaudit.capture.native).", -1, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&ScannerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *names = PyTuple_New(SK_COUNT - 1);
    for (int i = 0; names != NULL && i < SK_COUNT - 1; i++) {
        PyObject *name = PyUnicode_FromString(SKIP_NAMES[i]);
        if (name == NULL) {
            Py_CLEAR(names);
            break;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    Py_INCREF(&ScannerType);
    if (names == NULL || PyModule_AddObject(m, "SKIP_REASONS", names) < 0 ||
        PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_XDECREF(names);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
