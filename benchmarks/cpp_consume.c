/*
 * Receive timer on the official C++ RocketMQ client's C API (librocketmq 1.2.4, the library bundled
 * in PyPI rocketmq==0.4.4): a clustering push consumer of a new group takes COUNT messages of a
 * topic's backlog, each acknowledged by the callback returning CONSUME_SUCCESS (the client then
 * commits offsets). benchmarks/sdk5.py compiles it at run time against the .so in .venv-cpp.
 *
 *   cpp_consume NAMESRV TOPIC GROUP COUNT THREADS TIMEOUT_SECONDS
 *
 * Prints one JSON line: messages, elapsed (s, from the first message delivered to the COUNT-th),
 * startup (s, from StartPushConsumer to the first message: rebalance and the first pull).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void CPushConsumer;
typedef void CMessageExt;
typedef int (*MessageCallBack)(CPushConsumer *, CMessageExt *);

extern CPushConsumer *CreatePushConsumer(const char *groupId);
extern int SetPushConsumerNameServerAddress(CPushConsumer *consumer, const char *namesrv);
extern int SetPushConsumerThreadCount(CPushConsumer *consumer, int threadCount);
extern int SetPushConsumerLogLevel(CPushConsumer *consumer, int level);
extern int Subscribe(CPushConsumer *consumer, const char *topic, const char *expression);
extern int RegisterMessageCallback(CPushConsumer *consumer, MessageCallBack callback);
extern int StartPushConsumer(CPushConsumer *consumer);
extern int ShutdownPushConsumer(CPushConsumer *consumer);
extern int DestroyPushConsumer(CPushConsumer *consumer);

static long received, target;
static double first_at, last_at;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int on_message(CPushConsumer *consumer, CMessageExt *msg) {
    (void)consumer;
    (void)msg;
    double t = now_s();
    long n = __atomic_add_fetch(&received, 1, __ATOMIC_SEQ_CST);
    if (n == 1) first_at = t;
    if (n == target) last_at = t;
    return 0; /* CONSUME_SUCCESS */
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s NAMESRV TOPIC GROUP COUNT THREADS TIMEOUT_SECONDS\n", argv[0]);
        return 2;
    }
    target = atol(argv[4]);
    double timeout = atof(argv[6]);
    CPushConsumer *consumer = CreatePushConsumer(argv[3]);
    SetPushConsumerNameServerAddress(consumer, argv[1]);
    SetPushConsumerThreadCount(consumer, atoi(argv[5]));
    SetPushConsumerLogLevel(consumer, 2); /* errors only, in ~/logs/rocketmq-cpp */
    Subscribe(consumer, argv[2], "*");
    RegisterMessageCallback(consumer, on_message);
    double started = now_s();
    if (StartPushConsumer(consumer) != 0) { fprintf(stderr, "StartPushConsumer failed\n"); return 1; }
    while (__atomic_load_n(&received, __ATOMIC_SEQ_CST) < target && now_s() - started < timeout) usleep(10000);
    long n = __atomic_load_n(&received, __ATOMIC_SEQ_CST);
    double end = n >= target ? last_at : now_s();
    printf("{\"messages\": %ld, \"elapsed\": %.3f, \"startup\": %.3f, \"errors\": 0}\n", n < target ? n : target,
           n ? end - first_at : 0.0, n ? first_at - started : 0.0);
    fflush(stdout);
    ShutdownPushConsumer(consumer);
    DestroyPushConsumer(consumer);
    return 0;
}
