// Writes what Apache RocketMQ 5.3.3 writes for POP (fastjson 1.2.x default features), for finchmq's
// golden tests: the revive topic's payloads (PopCheckPoint, AckMsg, BatchAckMsg), the BATCH_ACK_MESSAGE
// body, consumerOrderInfo.json, and ExtraInfoUtil's / ReceiptHandle's strings.
// Run by tests/protocol/record_java_pop.py against 5.3.3's own classes; each result goes to OUT/<name>.
import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import golden.ConsumerOrderInfoManager;
import org.apache.rocketmq.common.KeyBuilder;
import org.apache.rocketmq.common.consumer.ReceiptHandle;
import org.apache.rocketmq.remoting.protocol.body.BatchAck;
import org.apache.rocketmq.remoting.protocol.body.BatchAckMessageRequestBody;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.store.pop.AckMsg;
import org.apache.rocketmq.store.pop.BatchAckMsg;
import org.apache.rocketmq.store.pop.PopCheckPoint;

public class GoldenPop {
    static Path out;

    static void write(String name, String text) throws Exception {
        Files.write(out.resolve(name), text.getBytes(StandardCharsets.UTF_8));
    }

    static PopCheckPoint ck(long startOffset, int num, String topic, String group) {
        PopCheckPoint ck = new PopCheckPoint();
        ck.setBitMap(0);
        ck.setNum((byte) num);
        ck.setPopTime(1700000000123L);
        ck.setInvisibleTime(60000);
        ck.setStartOffset(startOffset);
        ck.setCId(group);
        ck.setTopic(topic);
        ck.setQueueId(3);
        ck.setBrokerName("broker-a");
        return ck;
    }

    public static void main(String[] args) throws Exception {
        out = Paths.get(args[0]);
        Files.createDirectories(out);

        // PopMessageProcessor.appendCheckPoint: offsets 100, 101, 105
        PopCheckPoint popped = ck(100, 3, "TopicA", "GID_pop");
        popped.addDiff(0);
        popped.addDiff(1);
        popped.addDiff(5);
        write("ck_popped.json", JSON.toJSONString(popped));
        // PopReviveService.rePutCK: a check point read back (revive offset) and written again
        PopCheckPoint reput = ck(105, 1, "%RETRY%GID_pop_TopicA", "GID_pop");
        reput.addDiff(0);
        reput.setBitMap(1);
        reput.setReviveOffset(42);
        reput.setRePutTimes("3");
        write("ck_reput.json", JSON.toJSONString(reput));
        // an old-style check point: no diffs, no broker name
        PopCheckPoint old = ck(7, 2, "TopicA", "GID_pop");
        old.setBrokerName(null);
        write("ck_old.json", JSON.toJSONString(old));
        write("ck_unicode.json", JSON.toJSONString(ck(0, 1, "Tópic-ü", "组")));

        AckMsg ack = new AckMsg();
        ack.setAckOffset(101);
        ack.setStartOffset(100);
        ack.setConsumerGroup("GID_pop");
        ack.setTopic("TopicA");
        ack.setQueueId(3);
        ack.setPopTime(1700000000123L);
        ack.setBrokerName("broker-a");
        write("ack.json", JSON.toJSONString(ack));

        // PopBufferMergeService.putBatchAckToStore leaves ackOffset and brokerName unset
        BatchAckMsg bAck = new BatchAckMsg();
        bAck.getAckOffsetList().addAll(Arrays.asList(100L, 105L));
        bAck.setStartOffset(100);
        bAck.setConsumerGroup("GID_pop");
        bAck.setTopic("TopicA");
        bAck.setQueueId(3);
        bAck.setPopTime(1700000000123L);
        write("batch_ack_msg.json", JSON.toJSONString(bAck));
        // AckMessageProcessor.appendAck for BATCH_ACK_MESSAGE: ackOffset -1, brokerName set
        bAck.setAckOffset(-1);
        bAck.setBrokerName("broker-a");
        write("batch_ack_msg_processor.json", JSON.toJSONString(bAck));

        BatchAck first = new BatchAck();
        first.setConsumerGroup("GID_pop");
        first.setTopic("TopicA");
        first.setRetry("0");
        first.setStartOffset(100);
        first.setQueueId(3);
        first.setReviveQueueId(5);
        first.setPopTime(1700000000123L);
        first.setInvisibleTime(60000);
        BitSet bits = new BitSet();
        bits.set(0);
        bits.set(5);
        bits.set(9);
        bits.set(64);
        first.setBitSet(bits);
        BatchAck second = new BatchAck();
        second.setConsumerGroup("GID_pop");
        second.setTopic("TopicA");
        second.setRetry("1");
        second.setStartOffset(0);
        second.setQueueId(0);
        second.setReviveQueueId(999);
        second.setPopTime(1700000000999L);
        second.setInvisibleTime(30000);
        second.setBitSet(new BitSet());
        BatchAckMessageRequestBody body = new BatchAckMessageRequestBody();
        body.setBrokerName("broker-a");
        body.setAcks(new ArrayList<>(Arrays.asList(first, second)));
        write("batch_ack_body.json", new String(body.encode(), StandardCharsets.UTF_8));

        ConsumerOrderInfoManager orders = new ConsumerOrderInfoManager();
        ConcurrentHashMap<Integer, ConsumerOrderInfoManager.OrderInfo> queues = new ConcurrentHashMap<>(16);
        ConsumerOrderInfoManager.OrderInfo info = new ConsumerOrderInfoManager.OrderInfo(
            "attempt-1", 1700000000123L, 60000, Arrays.asList(10L, 11L, 14L), 1700000000456L, 0);
        info.setCommitOffsetBit(2);
        info.updateOffsetNextVisibleTime(14L, 1700000099000L);
        Map<Long, Integer> counts = new HashMap<>();
        counts.put(10L, 2);
        counts.put(14L, 1);
        info.setOffsetConsumedCount(counts);
        queues.put(3, info);
        queues.put(0, new ConsumerOrderInfoManager.OrderInfo(
            null, 1700000000000L, 30000, Arrays.asList(5L), 1700000000001L, 0));
        orders.getTable().put("TopicA@GID_order", queues);
        ConcurrentHashMap<Integer, ConsumerOrderInfoManager.OrderInfo> more = new ConcurrentHashMap<>(16);
        more.put(17, new ConsumerOrderInfoManager.OrderInfo(
            "a", 1, 2, Arrays.asList(0L, 1L), 3, 1));
        orders.getTable().put("TopicB@GID_order", more);
        write("consumer_order_info.json", orders.encode());

        // extra info (PopMessageProcessor, POP_CK of a retry message) and the proxy's receipt handle
        StringBuilder lines = new StringBuilder();
        lines.append(ExtraInfoUtil.buildExtraInfo(100, 1700000000123L, 60000, 5, "TopicA", "broker-a", 3)).append('\n');
        lines.append(ExtraInfoUtil.buildExtraInfo(100, 1700000000123L, 60000, 5, "%RETRY%GID_pop_TopicA", "broker-a", 0, 104)).append('\n');
        lines.append(ExtraInfoUtil.buildExtraInfo(7, 1, 2, 999, "%RETRY%GID_pop+TopicA", "b", 0, 8)).append('\n');
        StringBuilder start = new StringBuilder();
        ExtraInfoUtil.buildStartOffsetInfo(start, "TopicA", 3, 100);
        ExtraInfoUtil.buildStartOffsetInfo(start, "%RETRY%GID_pop_TopicA", 0, 7);
        lines.append(start).append('\n');
        StringBuilder msgs = new StringBuilder();
        ExtraInfoUtil.buildMsgOffsetInfo(msgs, "TopicA", 3, Arrays.asList(100L, 101L, 105L));
        ExtraInfoUtil.buildMsgOffsetInfo(msgs, "%RETRY%GID_pop+TopicA", 0, Arrays.asList(7L));
        lines.append(msgs).append('\n');
        StringBuilder orderCount = new StringBuilder();
        ExtraInfoUtil.buildQueueOffsetOrderCountInfo(orderCount, "TopicA", 3, 10, 2);
        ExtraInfoUtil.buildQueueIdOrderCountInfo(orderCount, "TopicA", 3, 0);
        lines.append(orderCount).append('\n');
        lines.append(KeyBuilder.buildPopRetryTopicV1("TopicA", "GID_pop")).append('\n');
        lines.append(KeyBuilder.buildPopRetryTopicV2("TopicA", "GID_pop")).append('\n');
        lines.append(KeyBuilder.buildPollingKey("TopicA", "GID_pop", 3)).append('\n');
        ReceiptHandle handle = ReceiptHandle.builder().startOffset(100).retrieveTime(1700000000123L)
            .invisibleTime(60000).reviveQueueId(5).topicType(ReceiptHandle.RETRY_TOPIC).brokerName("broker-a")
            .queueId(0).offset(104).commitLogOffset(123456).build();
        lines.append(handle.encode()).append('\n');
        write("strings.txt", lines.toString());
    }
}
