/*
 * A closed-loop load generator of raw RocketMQ send frames, so a broker's send path is measured
 * with no client library in the way. benchmarks/send_path.py compiles it on demand with gcc.
 *
 *   send_gen HOST PORT[,PORT...] CONNS WARMUP_S SECONDS BODY BATCH TOPIC KEYS
 *
 * One thread per connection, one request in flight on each; with several ports (the brokers of
 * `finchmq server --brokers N`) connection i goes to the (i mod N)-th, so they share the load evenly. BATCH 0 sends SEND_MESSAGE_V2 (code
 * 310) frames of one BODY-byte message; BATCH n sends SEND_BATCH_MESSAGE (code 320, header m=true)
 * frames whose body is n messages in Java's MessageDecoder.encodeMessages layout (TOTALSIZE,
 * MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN, BODY, short PROPERTIESLENGTH, PROPERTIES). The topic is
 * auto-created through TBW102 (the default topic Java's broker needs too); the queue id is the
 * connection's number among its port's connections, mod 4. KEYS 1 gives every
 * message a UNIQ_KEY property, as the Java client does.
 *
 * Prints "measure" when the warm-up ends and the counting window starts, then, when it ends,
 * "done requests=R messages=M errors=E seconds=S" (and "first_error=..." if any): R requests
 * answered in the window, M messages in those answered with code 0, E answered with another
 * code. The caller reads the server's CPU time at both lines.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 1024
#define MAX_RESPONSE (4 << 20)

static const char *host, *topic;
#define MAX_PORTS 64
static int ports[MAX_PORTS], nports, body_size, batch, keys;
static volatile int measuring, stopping;
static long requests[MAX_CONNS], messages[MAX_CONNS], errors[MAX_CONNS];
static char first_error[512];
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int read_full(int fd, char *buf, int n) {
    int got = 0;
    while (got < n) {
        int r = (int)read(fd, buf + got, n - got);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

static int write_full(int fd, const char *buf, int n) {
    int put = 0;
    while (put < n) {
        int w = (int)write(fd, buf + put, n - put);
        if (w <= 0) return -1;
        put += w;
    }
    return 0;
}

static void put32(char *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static void put16(char *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }
static uint32_t get32(const char *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }

/* One message's properties: TAGS and WAIT (and UNIQ_KEY with KEYS), name\1value\2 each. */
static int properties(char *out, long conn, long seq) {
    int n = sprintf(out, "TAGS\001T\002WAIT\001true\002");
    if (keys) n += sprintf(out + n, "UNIQ_KEY\001%08lX%08X%016lX\002", conn, (unsigned)getpid(), seq);
    return n;
}

/* The body of a SEND_BATCH_MESSAGE request: batch items in encodeMessages' layout. */
static int batch_body(char *out, const char *payload, long conn, long *seq) {
    int pos = 0;
    for (int i = 0; i < batch; i++) {
        char props[128];
        int plen = properties(props, conn, (*seq)++);
        int size = 4 + 4 + 4 + 4 + 4 + body_size + 2 + plen;
        put32(out + pos, size);
        put32(out + pos + 4, 0);  /* MAGICCODE */
        put32(out + pos + 8, 0);  /* BODYCRC */
        put32(out + pos + 12, 0); /* FLAG */
        put32(out + pos + 16, body_size);
        memcpy(out + pos + 20, payload, body_size);
        put16(out + pos + 20 + body_size, plen);
        memcpy(out + pos + 22 + body_size, props, plen);
        pos += size;
    }
    return pos;
}

static void record_error(const char *header, int len) {
    pthread_mutex_lock(&error_lock);
    if (!first_error[0]) {
        int n = len < (int)sizeof first_error - 1 ? len : (int)sizeof first_error - 1;
        memcpy(first_error, header, n);
        first_error[n] = 0;
    }
    pthread_mutex_unlock(&error_lock);
}

static void *run(void *arg) {
    long conn = (long)arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(ports[conn % nports]);
    inet_pton(AF_INET, host, &addr.sin_addr);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
        perror("connect");
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int items = batch ? batch : 1;
    size_t cap = 8 + 2048 + (size_t)items * (body_size + 256);
    char *request = malloc(cap), *response = malloc(MAX_RESPONSE), *payload = malloc(body_size + 1);
    memset(payload, 'x', body_size);
    int opaque = (int)conn * 1000000;
    long seq = 0;
    while (!stopping) {
        char props[256], header[2048], *body = request + 8 + sizeof header;
        int body_len, code = batch ? 320 : 310;
        if (batch) {
            body_len = batch_body(body, payload, conn, &seq);
            sprintf(props, "WAIT\\u0001true\\u0002"); /* the batch's own properties */
        } else {
            char raw[128];
            int plen = properties(raw, conn, seq++);
            /* the properties travel inside the JSON header: \1 and \2 escaped */
            int p = 0;
            for (int i = 0; i < plen; i++) {
                if (raw[i] == 1 || raw[i] == 2)
                    p += sprintf(props + p, "\\u000%d", raw[i]);
                else
                    props[p++] = raw[i];
            }
            props[p] = 0;
            memcpy(body, payload, body_size);
            body_len = body_size;
        }
        int hl = snprintf(header, sizeof header,
            "{\"code\":%d,\"extFields\":{\"a\":\"SendPathPG\",\"b\":\"%s\",\"c\":\"TBW102\",\"d\":\"4\","
            "\"e\":\"%ld\",\"f\":\"0\",\"g\":\"1700000000000\",\"h\":\"0\",\"i\":\"%s\",\"j\":\"0\","
            "\"k\":\"false\",\"m\":\"%s\"},\"flag\":0,\"language\":\"JAVA\",\"opaque\":%d,"
            "\"serializeTypeCurrentRPC\":\"JSON\",\"version\":395}",
            code, topic, conn / nports % 4, props, batch ? "true" : "false", opaque++);
        /* length prefix + header right before the body, so the frame is one contiguous write */
        char *frame = body - hl - 8;
        put32(frame, 4 + hl + body_len);
        put32(frame + 4, hl);
        memcpy(frame + 8, header, hl);
        if (write_full(fd, frame, 8 + hl + body_len)) break;
        char word[4];
        if (read_full(fd, word, 4)) break;
        int len = (int)get32(word);
        if (len < 4 || len > MAX_RESPONSE - 1 || read_full(fd, response, len)) break;
        int rhl = (int)(get32(response) & 0xFFFFFF);
        if (rhl > len - 4) rhl = len - 4;
        response[4 + rhl] = 0;
        const char *c = strstr(response + 4, "\"code\":");
        int failed = !c || atoi(c + 7) != 0;
        if (measuring) {
            requests[conn]++;
            if (!failed) messages[conn] += items;
            if (failed) {
                errors[conn]++;
                record_error(response + 4, rhl);
            }
        }
    }
    close(fd);
    free(request);
    free(response);
    free(payload);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s HOST PORT[,PORT...] CONNS WARMUP_S SECONDS BODY BATCH TOPIC KEYS\n", argv[0]);
        return 2;
    }
    host = argv[1];
    for (char *p = argv[2]; *p && nports < MAX_PORTS; nports++) {
        ports[nports] = (int)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    int conns = atoi(argv[3]);
    double warmup = atof(argv[4]), seconds = atof(argv[5]);
    body_size = atoi(argv[6]);
    batch = atoi(argv[7]);
    topic = argv[8];
    keys = atoi(argv[9]);
    if (nports < 1 || conns < 1 || conns > MAX_CONNS || body_size < 0 || batch < 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    pthread_t threads[MAX_CONNS];
    for (long i = 0; i < conns; i++) pthread_create(&threads[i], NULL, run, (void *)i);
    usleep((useconds_t)(warmup * 1e6));
    double began = now_s();
    measuring = 1;
    printf("measure\n");
    fflush(stdout);
    usleep((useconds_t)(seconds * 1e6));
    measuring = 0;
    double elapsed = now_s() - began;
    long r = 0, m = 0, e = 0;
    for (int i = 0; i < conns; i++) {
        r += requests[i];
        m += messages[i];
        e += errors[i];
    }
    printf("done requests=%ld messages=%ld errors=%ld seconds=%.3f\n", r, m, e, elapsed);
    if (first_error[0]) printf("first_error=%s\n", first_error);
    fflush(stdout);
    stopping = 1;
    for (int i = 0; i < conns; i++) pthread_join(threads[i], NULL);
    return 0;
}
