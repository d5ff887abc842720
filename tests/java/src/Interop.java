// The official Java client (Apache RocketMQ 4.9.8) driven by finchmq's interop tests.
// Prints one JSON object per line; the test that started it reads them.
//   produce NAMESRV TOPIC COUNT        sync, async, oneway, selector and batch sends (COUNT each)
//   push NAMESRV GROUP TOPIC EXPECT concurrent|orderly|broadcast [FAIL_PREFIX]
//   litepull NAMESRV GROUP TOPIC EXPECT
//   requestreply NAMESRV TOPIC COUNT  a push consumer answers (MessageUtil.createReplyMessage),
//                                     a producer sends COUNT requests and prints the replies
//   sqlpush NAMESRV GROUP TOPIC SQL   a push consumer with MessageSelector.bySql; then an end marker
//                                     (TagA, key "the-end") in every queue: done once it has consumed
//                                     up to every marker (so whatever the broker lets through has come)
//   traced NAMESRV TOPIC              one send with enableMsgTrace, consumed with enableMsgTrace; done
//                                     once the broker has its Pub, SubBefore and SubAfter traces
//   mqadmin FILE                      Java's mqadmin commands (one per line, arguments tab-separated)
//                                     in this one JVM, each one's output printed as a JSON string
//   transaction NAMESRV TOPIC COUNT   TransactionMQProducer: COUNT commits, rollbacks and unknowns
//                                     (the broker's check commits those); done once the broker has
//                                     stored the checked ones
//   acl NAMESRV TOPIC GROUP ACCESS_KEY SECRET_KEY COUNT   a producer and a lite pull consumer signing
//                                     with AclClientRPCHook: COUNT sends, then the consumer reads them
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

public class Interop {
    static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static Message message(String topic, String key) {
        Message m = new Message(topic, "TagA", key, ("body-" + key).getBytes(StandardCharsets.UTF_8));
        return m;
    }

    static void sent(String mode, String key, SendResult r) {
        emit("{\"mode\":" + q(mode) + ",\"key\":" + q(key) + ",\"status\":" + q(r.getSendStatus().name())
            + ",\"queue\":" + r.getMessageQueue().getQueueId() + ",\"offset\":" + r.getQueueOffset()
            + ",\"msgId\":" + q(r.getMsgId()) + "}");
    }

    // -Dinterop.namespace=X: the producers and push consumers run with ClientConfig.namespace X
    static final String NAMESPACE = System.getProperty("interop.namespace");

    static void produce(String ns, String topic, int count) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("java_interop_pg");
        p.setNamesrvAddr(ns);
        if (NAMESPACE != null) p.setNamespace(NAMESPACE);
        p.setInstanceName("interop-" + System.nanoTime());
        p.start();
        try {
            for (int i = 0; i < count; i++) {
                String key = "sync-" + i;
                sent("sync", key, p.send(message(topic, key)));
            }
            CountDownLatch async = new CountDownLatch(count);
            for (int i = 0; i < count; i++) {
                final String key = "async-" + i;
                p.send(message(topic, key), new SendCallback() {
                    public void onSuccess(SendResult r) { sent("async", key, r); async.countDown(); }
                    public void onException(Throwable e) {
                        emit("{\"mode\":\"async\",\"key\":" + q(key) + ",\"error\":" + q(e.toString()) + "}");
                        async.countDown();
                    }
                });
            }
            async.await(60, TimeUnit.SECONDS);
            for (int i = 0; i < count; i++) {
                String key = "oneway-" + i;
                p.sendOneway(message(topic, key));
                emit("{\"mode\":\"oneway\",\"key\":" + q(key) + ",\"status\":\"ONEWAY\"}");
            }
            for (int i = 0; i < count; i++) {
                String key = "selector-" + i;
                SendResult r = p.send(message(topic, key),
                    (List<MessageQueue> mqs, Message msg, Object arg) -> mqs.get((Integer) arg % mqs.size()), i);
                sent("selector", key, r);
            }
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < count; i++) batch.add(message(topic, "batch-" + i));
            SendResult r = p.send(batch);
            for (int i = 0; i < count; i++) {
                emit("{\"mode\":\"batch\",\"key\":" + q("batch-" + i) + ",\"status\":" + q(r.getSendStatus().name()) + "}");
            }
        } finally {
            p.shutdown();
        }
        emit("{\"done\":true}");
    }

    static void received(String instance, MessageExt m) {
        emit("{\"instance\":" + q(instance) + ",\"key\":" + q(m.getKeys()) + ",\"body\":"
            + q(new String(m.getBody(), StandardCharsets.UTF_8)) + ",\"queue\":" + m.getQueueId() + ",\"offset\":"
            + m.getQueueOffset() + ",\"reconsume\":" + m.getReconsumeTimes() + ",\"topic\":" + q(m.getTopic()) + "}");
    }

    static DefaultMQPushConsumer pushConsumer(String ns, String group, String topic, String instance) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        if (NAMESPACE != null) c.setNamespace(NAMESPACE);
        c.setInstanceName(instance);
        // shutdown() waits for the listeners still running, so it persists every consumed offset
        c.setAwaitTerminationMillisWhenShutdown(60_000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        return c;
    }

    static void push(String ns, String group, String topic, int expect, String mode, String failPrefix) throws Exception {
        int instances = mode.equals("broadcast") ? 2 : 1;
        // done when every instance has seen `expect` distinct keys and every failed key came back
        CountDownLatch done = new CountDownLatch(instances);
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int n = 0; n < instances; n++) {
            final String instance = "interop-" + mode + "-" + n;
            Set<String> seen = ConcurrentHashMap.newKeySet();
            Set<String> retried = ConcurrentHashMap.newKeySet();
            DefaultMQPushConsumer c = pushConsumer(ns, group, topic, instance);
            Runnable check = () -> {
                if (seen.size() >= expect && (failPrefix.isEmpty() || retried.size() >= failures(seen, failPrefix))) {
                    done.countDown();
                }
            };
            if (mode.equals("orderly")) {
                c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                    for (MessageExt m : msgs) { received(instance, m); seen.add(m.getKeys()); }
                    check.run();
                    return ConsumeOrderlyStatus.SUCCESS;
                });
            } else {
                if (mode.equals("broadcast")) c.setMessageModel(MessageModel.BROADCASTING);
                c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    for (MessageExt m : msgs) {
                        received(instance, m);
                        if (!failPrefix.isEmpty() && m.getKeys().startsWith(failPrefix) && m.getReconsumeTimes() == 0) {
                            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                        }
                        if (m.getReconsumeTimes() > 0) retried.add(m.getKeys());
                        seen.add(m.getKeys());
                    }
                    check.run();
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
                c.setConsumeMessageBatchMaxSize(1);
            }
            consumers.add(c);
        }
        for (DefaultMQPushConsumer c : consumers) c.start();
        boolean ok = done.await(90, TimeUnit.SECONDS);
        for (DefaultMQPushConsumer c : consumers) c.shutdown();
        emit("{\"done\":" + ok + "}");
    }

    static int failures(Set<String> seen, String prefix) {
        int n = 0;
        for (String k : seen) if (k.startsWith(prefix)) n++;
        return n;
    }

    static void litePull(String ns, String group, String topic, int expect) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName("interop-lite");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        long deadline = System.currentTimeMillis() + 90_000;
        try {
            while (seen.size() < expect && System.currentTimeMillis() < deadline) {
                for (MessageExt m : c.poll(1000)) { received("lite", m); seen.add(m.getKeys()); }
            }
        } finally {
            c.shutdown();
        }
        emit("{\"done\":" + (seen.size() >= expect) + "}");
    }

    static void transaction(String ns, String topic, int count) throws Exception {
        TransactionMQProducer p = new TransactionMQProducer("java_tx_pg");
        p.setNamesrvAddr(ns);
        p.setInstanceName("interop-tx-" + System.nanoTime());
        CountDownLatch checks = new CountDownLatch(count);
        Set<String> checked = ConcurrentHashMap.newKeySet();  // a key may be checked twice
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String key = msg.getKeys();
                if (key.startsWith("commit")) return LocalTransactionState.COMMIT_MESSAGE;
                if (key.startsWith("rollback")) return LocalTransactionState.ROLLBACK_MESSAGE;
                return LocalTransactionState.UNKNOW;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                emit("{\"checked\":" + q(msg.getKeys()) + ",\"topic\":" + q(msg.getTopic())
                    + ",\"transactionId\":" + q(String.valueOf(msg.getTransactionId())) + "}");
                if (checked.add(msg.getKeys())) checks.countDown();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        try {
            for (String kind : new String[] {"commit", "rollback", "unknown"}) {
                for (int i = 0; i < count; i++) {
                    String key = kind + "-" + i;
                    TransactionSendResult r = p.sendMessageInTransaction(message(topic, key), null);
                    emit("{\"mode\":\"transaction\",\"key\":" + q(key) + ",\"status\":"
                        + q(r.getSendStatus().name()) + ",\"state\":" + q(r.getLocalTransactionState().name())
                        + ",\"msgId\":" + q(r.getMsgId()) + "}");
                }
            }
            boolean ok = checks.await(90, TimeUnit.SECONDS);
            // each check's answer (END_TRANSACTION, oneway) goes out after the listener returned:
            // shut down only once the broker has stored every checked message
            long deadline = System.currentTimeMillis() + 60_000;
            for (int i = 0; ok && i < count; i++) {
                while (!found(p, topic, "unknown-" + i)) {
                    if (System.currentTimeMillis() > deadline) { ok = false; break; }
                    Thread.sleep(100);  // polling interval
                }
            }
            emit("{\"done\":" + ok + "}");
        } finally {
            p.shutdown();
        }
    }

    /** Messages of TOPIC with KEY, as the broker's index answers (none yet: an empty list). */
    static List<MessageExt> byKey(DefaultMQProducer p, String topic, String key) throws InterruptedException {
        List<MessageExt> found = new ArrayList<>();
        try {
            for (MessageExt m : p.queryMessage(topic, key, 32, 0, Long.MAX_VALUE).getMessageList()) {
                if (topic.equals(m.getTopic())) found.add(m);  // not a half message with that key
            }
        } catch (MQClientException e) {  // "query message by key finished, but no message."
        }
        return found;
    }

    static boolean found(DefaultMQProducer p, String topic, String key) throws InterruptedException {
        return !byKey(p, topic, key).isEmpty();
    }

    static void requestReply(String ns, String topic, int count) throws Exception {
        DefaultMQProducer replier = new DefaultMQProducer("java_reply_pg");
        replier.setNamesrvAddr(ns);
        replier.setInstanceName("interop-replier-" + System.nanoTime());
        replier.start();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("java_reply_g");
        c.setNamesrvAddr(ns);
        c.setInstanceName("interop-responder-" + System.nanoTime());
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("re:" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    replier.send(MessageUtil.createReplyMessage(m, body), 5000);
                } catch (Exception e) {
                    emit("{\"error\":" + q(e.toString()) + "}");
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer requester = new DefaultMQProducer("java_request_pg");
        requester.setNamesrvAddr(ns);
        requester.setInstanceName("interop-requester-" + System.nanoTime());
        requester.start();
        try {
            for (int i = 0; i < count; i++) {
                Message reply = requester.request(new Message(topic, ("q" + i).getBytes(StandardCharsets.UTF_8)), 30000);
                emit("{\"reply\":" + q(new String(reply.getBody(), StandardCharsets.UTF_8)) + "}");
            }
            emit("{\"done\":true}");
        } finally {
            requester.shutdown();
            c.shutdown();
            replier.shutdown();
        }
    }

    static void sqlPush(String ns, String group, String topic, String sql) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setInstanceName("interop-sql-" + System.nanoTime());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, MessageSelector.bySql(sql));
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) emit("{\"key\":" + q(m.getKeys()) + "}");
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        try {
            c.start();
        } catch (Exception e) {
            emit("{\"startError\":" + q(e.getMessage()) + "}");
            emit("{\"done\":true}");
            return;
        }
        // An end marker in every queue, after everything else: once the consumer's offset of each
        // queue is past its marker, it has consumed whatever the broker handed it before that.
        DefaultMQProducer p = new DefaultMQProducer("java_sql_end_pg");
        p.setNamesrvAddr(ns);
        p.setInstanceName("interop-sql-end-" + System.nanoTime());
        p.start();
        Map<MessageQueue, Long> markers = new HashMap<>();
        try {
            for (MessageQueue mq : p.fetchPublishMessageQueues(topic)) {
                markers.put(mq, p.send(message(topic, "the-end"), mq).getQueueOffset());
            }
        } finally {
            p.shutdown();
        }
        boolean ok = false;
        long deadline = System.currentTimeMillis() + 60_000;
        while (!ok && System.currentTimeMillis() < deadline) {
            ok = true;
            for (Map.Entry<MessageQueue, Long> marker : markers.entrySet()) {
                long offset = c.getDefaultMQPushConsumerImpl().getOffsetStore()
                    .readOffset(marker.getKey(), ReadOffsetType.READ_FROM_MEMORY);
                ok &= offset > marker.getValue();
            }
            if (!ok) Thread.sleep(100);  // polling interval
        }
        c.shutdown();
        emit("{\"done\":" + ok + "}");
    }

    static void traced(String ns, String topic) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer("java_traced_g", true);
        c.setNamesrvAddr(ns);
        c.setInstanceName("interop-traced-c-" + System.nanoTime());
        c.subscribe(topic, "*");
        CountDownLatch got = new CountDownLatch(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            got.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = new DefaultMQProducer("java_traced_pg", true);
        p.setNamesrvAddr(ns);
        p.setInstanceName("interop-traced-p-" + System.nanoTime());
        p.start();
        SendResult r = p.send(message(topic, "traced-1"));
        emit("{\"msgId\":" + q(r.getMsgId()) + "}");
        boolean ok = got.await(60, TimeUnit.SECONDS);
        // the dispatchers send traces in the background: shut down once the broker has them all
        long deadline = System.currentTimeMillis() + 60_000;
        while (ok && !traced(p, r.getMsgId())) {
            if (System.currentTimeMillis() > deadline) { ok = false; break; }
            Thread.sleep(100);  // polling interval
        }
        p.shutdown();
        c.shutdown();
        emit("{\"done\":" + ok + "}");
    }

    /** The trace topic holds the send's (Pub) and the consumption's (SubBefore, SubAfter) traces of MSG_ID. */
    static boolean traced(DefaultMQProducer p, String msgId) throws InterruptedException {
        StringBuilder traces = new StringBuilder();
        for (MessageExt t : byKey(p, "RMQ_SYS_TRACE_TOPIC", msgId)) {
            traces.append(new String(t.getBody(), StandardCharsets.UTF_8));
        }
        String all = traces.toString();  // each trace is TYPE, (char) 1, fields ...
        return all.contains("Pub\u0001") && all.contains("SubBefore\u0001") && all.contains("SubAfter\u0001");
    }

    static void mqadminBatch(String file) throws Exception {
        java.io.PrintStream out = System.out;
        java.io.PrintStream err = System.err;
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Paths.get(file), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) continue;
            java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
            java.io.PrintStream stream = new java.io.PrintStream(captured, true, "UTF-8");
            System.setOut(stream);
            System.setErr(stream);
            try {
                org.apache.rocketmq.tools.command.MQAdminStartup.main0(line.split("\t"), null);
            } finally {
                stream.flush();
                System.setOut(out);
                System.setErr(err);
            }
            emit("{\"out\":" + q(captured.toString("UTF-8")) + "}");
        }
        emit("{\"done\":true}");
    }

    static String causes(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) b.append(t.toString()).append(" | ");
        return b.toString();
    }

    static void acl(String ns, String topic, String group, String ak, String sk, int count) throws Exception {
        AclClientRPCHook hook = new AclClientRPCHook(new SessionCredentials(ak, sk));
        DefaultMQProducer p = new DefaultMQProducer("java_acl_pg", hook);
        p.setNamesrvAddr(ns);
        p.setInstanceName("interop-acl-" + System.nanoTime());
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        int ok = 0;
        try {
            for (int i = 0; i < count; i++) {
                String key = "acl-" + i;
                try {
                    sent("acl", key, p.send(message(topic, key)));
                    ok++;
                } catch (Exception e) {
                    emit("{\"mode\":\"acl\",\"key\":" + q(key) + ",\"error\":" + q(causes(e)) + "}");
                }
            }
        } finally {
            p.shutdown();
        }
        if (ok == count) {
            DefaultLitePullConsumer c = new DefaultLitePullConsumer(group, hook);
            c.setNamesrvAddr(ns);
            c.setInstanceName("interop-acl-lite-" + System.nanoTime());
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.start();
            Set<String> seen = ConcurrentHashMap.newKeySet();
            long deadline = System.currentTimeMillis() + 60_000;
            try {
                while (seen.size() < count && System.currentTimeMillis() < deadline) {
                    for (MessageExt m : c.poll(1000)) { received("acl", m); seen.add(m.getKeys()); }
                }
            } finally {
                c.shutdown();
            }
        }
        emit("{\"done\":true}");
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "produce": produce(a[1], a[2], Integer.parseInt(a[3])); break;
            case "push": push(a[1], a[2], a[3], Integer.parseInt(a[4]), a[5], a.length > 6 ? a[6] : ""); break;
            case "litepull": litePull(a[1], a[2], a[3], Integer.parseInt(a[4])); break;
            case "transaction": transaction(a[1], a[2], Integer.parseInt(a[3])); break;
            case "traced": traced(a[1], a[2]); break;
            case "mqadmin": mqadminBatch(a[1]); break;
            case "requestreply": requestReply(a[1], a[2], Integer.parseInt(a[3])); break;
            case "sqlpush": sqlPush(a[1], a[2], a[3], a[4]); break;
            case "acl": acl(a[1], a[2], a[3], a[4], a[5], Integer.parseInt(a[6])); break;
            default: throw new IllegalArgumentException(a[0]);
        }
        System.exit(0);
    }
}
