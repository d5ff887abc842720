/*
 * Load generator on the official C++ RocketMQ client's C API (librocketmq 1.2.4, the library
 * bundled in PyPI rocketmq==0.4.4), so the broker under test is measured, not a Python client.
 * benchmarks/broker_send.py compiles it at run time against the .so in .venv-cpp.
 *
 *   cpp_loadgen NAMESRV TOPIC THREADS SECONDS SIZE BATCH WARMUP_SECONDS
 *
 * Prints one JSON line: messages, calls, errors, elapsed, and per-call latency p50/p99/max/avg (ms).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void CProducer;
typedef void CMessage;
typedef void CBatchMessage;
typedef struct { int sendStatus; char msgId[256]; long long offset; } CSendResult;

extern CProducer *CreateProducer(const char *groupId);
extern int SetProducerNameServerAddress(CProducer *producer, const char *namesrv);
extern int SetProducerSendMsgTimeout(CProducer *producer, int timeout);
extern int SetProducerLogLevel(CProducer *producer, int level);
extern int StartProducer(CProducer *producer);
extern int ShutdownProducer(CProducer *producer);
extern int DestroyProducer(CProducer *producer);
extern CMessage *CreateMessage(const char *topic);
extern int SetMessageTags(CMessage *msg, const char *tags);
extern int SetByteMessageBody(CMessage *msg, const char *body, int len);
extern int DestroyMessage(CMessage *msg);
extern int SendMessageSync(CProducer *producer, CMessage *msg, CSendResult *result);
extern const char *GetLatestErrorMessage(void);
extern CBatchMessage *CreateBatchMessage(void);
extern int AddMessage(CBatchMessage *batch, CMessage *msg);
extern int DestroyBatchMessage(CBatchMessage *batch);
extern int SendBatchMessage(CProducer *producer, CBatchMessage *batch, CSendResult *result);

static CProducer *producer;
static const char *topic;
static char *body;
static int body_len, batch;
static volatile int measuring, stopping;

typedef struct { double *lat; long n, cap, messages, errors; char first_error[160]; } Stats;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CMessage *make_message(void) {
    CMessage *msg = CreateMessage(topic);
    SetMessageTags(msg, "bench");
    SetByteMessageBody(msg, body, body_len);
    return msg;
}

static void *worker(void *arg) {
    Stats *s = arg;
    CSendResult result;
    while (!stopping) {
        double began = now_ms();
        int rc;
        if (batch > 0) {
            CBatchMessage *b = CreateBatchMessage();
            CMessage *msgs[1024];
            for (int i = 0; i < batch; i++) { msgs[i] = make_message(); AddMessage(b, msgs[i]); }
            rc = SendBatchMessage(producer, b, &result);
            for (int i = 0; i < batch; i++) DestroyMessage(msgs[i]);
            DestroyBatchMessage(b);
        } else {
            CMessage *msg = make_message();
            rc = SendMessageSync(producer, msg, &result);
            DestroyMessage(msg);
        }
        if (!measuring || stopping) continue;
        if (rc != 0 || result.sendStatus != 0) {
            if (!s->errors) {
                const char *why = rc != 0 ? GetLatestErrorMessage() : "send status not OK";
                snprintf(s->first_error, sizeof s->first_error, "rc=%d status=%d %s", rc, result.sendStatus,
                         why ? why : "");
                for (char *p = s->first_error; *p; p++) if (*p == '"' || *p == '\\' || *p < ' ') *p = ' ';
            }
            s->errors++;
            continue;
        }
        if (s->n == s->cap) { s->cap = s->cap ? s->cap * 2 : 65536; s->lat = realloc(s->lat, s->cap * sizeof(double)); }
        s->lat[s->n++] = now_ms() - began;
        s->messages += batch > 0 ? batch : 1;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s NAMESRV TOPIC THREADS SECONDS SIZE BATCH WARMUP\n", argv[0]);
        return 2;
    }
    topic = argv[2];
    int threads = atoi(argv[3]);
    double seconds = atof(argv[4]);
    body_len = atoi(argv[5]);
    batch = atoi(argv[6]);
    double warmup = atof(argv[7]);
    body = malloc(body_len);
    memset(body, 'x', body_len);
    producer = CreateProducer("bench_producer_c");
    SetProducerNameServerAddress(producer, argv[1]);
    SetProducerSendMsgTimeout(producer, 10000);
    SetProducerLogLevel(producer, 2); /* errors only, in ~/logs/rocketmq-cpp */
    if (StartProducer(producer) != 0) { fprintf(stderr, "StartProducer failed\n"); return 1; }
    pthread_t *tids = calloc(threads, sizeof(pthread_t));
    Stats *stats = calloc(threads, sizeof(Stats));
    for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, worker, &stats[i]);
    usleep((useconds_t)(warmup * 1e6));
    measuring = 1;
    double began = now_ms();
    usleep((useconds_t)(seconds * 1e6));
    stopping = 1;
    double elapsed = (now_ms() - began) / 1e3;
    for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
    long n = 0, messages = 0, errors = 0;
    const char *sample = "";
    for (int i = 0; i < threads; i++) {
        n += stats[i].n; messages += stats[i].messages; errors += stats[i].errors;
        if (stats[i].errors && !*sample) sample = stats[i].first_error;
    }
    double *all = malloc((n ? n : 1) * sizeof(double));
    long k = 0;
    double sum = 0;
    for (int i = 0; i < threads; i++) for (long j = 0; j < stats[i].n; j++) { all[k++] = stats[i].lat[j]; sum += stats[i].lat[j]; }
    qsort(all, n, sizeof(double), cmp);
    printf("{\"messages\": %ld, \"calls\": %ld, \"errors\": %ld, \"error_samples\": [\"%s\"], \"elapsed\": %.3f, "
           "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"avg_ms\": %.3f}\n",
           messages, n, errors, sample, elapsed, n ? all[n / 2] : 0.0, n ? all[(long)(n * 0.99)] : 0.0,
           n ? all[n - 1] : 0.0, n ? sum / n : 0.0);
    fflush(stdout);
    ShutdownProducer(producer);
    DestroyProducer(producer);
    return 0;
}
