// Writes the bodies Apache RocketMQ 4.9.8 encodes (fastjson 1.2.69), for finchmq's golden tests.
// Run by tests/protocol/record_java_bodies.py; each body goes to OUT/<name>.json as Java's bytes.
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.DataVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.admin.ConsumeStats;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.admin.TopicOffset;
import org.apache.rocketmq.common.admin.TopicStatsTable;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.*;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.common.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;

public class GoldenBodies {
    static Path out;

    static void write(String name, byte[] body) throws Exception {
        Files.write(out.resolve(name + ".json"), body);
    }

    static BrokerData broker(String cluster, String name, long... ids) {
        HashMap<Long, String> addrs = new HashMap<>();
        for (long id : ids) addrs.put(id, "10.0.0." + (id + 1) + ":10911");
        return new BrokerData(cluster, name, addrs);
    }

    static QueueData queue(String brokerName, int queues, int perm) {
        QueueData q = new QueueData();
        q.setBrokerName(brokerName);
        q.setReadQueueNums(queues);
        q.setWriteQueueNums(queues);
        q.setPerm(perm);
        q.setTopicSysFlag(0);
        return q;
    }

    public static void main(String[] args) throws Exception {
        out = Paths.get(args[0]);
        Files.createDirectories(out);

        TopicRouteData route = new TopicRouteData();
        route.setQueueDatas(new ArrayList<>(List.of(queue("broker-b", 8, 6), queue("broker-a", 4, 6))));
        route.setBrokerDatas(new ArrayList<>(List.of(broker("DefaultCluster", "broker-b", 0, 1, 2),
            broker("DefaultCluster", "broker-a", 0, 3))));
        HashMap<String, List<String>> filters = new HashMap<>();
        route.setFilterServerTable(filters);
        write("route.default", RemotingSerializable.encode(route));
        write("route.standard", route.encode(SerializerFeature.BrowserCompatible, SerializerFeature.QuoteFieldNames,
            SerializerFeature.SkipTransientField, SerializerFeature.MapSortField));
        route.setOrderTopicConf("broker-a:4;broker-b:8");
        filters.put("10.0.0.1:10911", new ArrayList<>(List.of("10.0.0.9:30000")));
        write("route_order_filter.default", RemotingSerializable.encode(route));
        write("route_order_filter.standard", route.encode(SerializerFeature.BrowserCompatible,
            SerializerFeature.QuoteFieldNames, SerializerFeature.SkipTransientField, SerializerFeature.MapSortField));

        ClusterInfo cluster = new ClusterInfo();
        HashMap<String, BrokerData> brokers = new HashMap<>();
        HashMap<String, Set<String>> clusters = new HashMap<>();
        String[][] layout = {{"DefaultCluster", "broker-a"}, {"DefaultCluster", "broker-b"},
            {"OtherCluster", "broker-c"}, {"DefaultCluster", "broker-zz"}, {"Ünïcode-集群", "broker-ü"}};
        long id = 0;
        for (String[] pair : layout) {
            brokers.put(pair[1], broker(pair[0], pair[1], 0, ++id));
            clusters.computeIfAbsent(pair[0], k -> new HashSet<>()).add(pair[1]);
        }
        cluster.setBrokerAddrTable(brokers);
        cluster.setClusterAddrTable(clusters);
        write("cluster_info.default", cluster.encode());

        TopicList topics = new TopicList();
        for (String t : List.of("TBW102", "SELF_TEST_TOPIC", "%RETRY%group_1", "OFFSET_MOVED_EVENT", "orders",
            "DefaultCluster", "broker-a", "SCHEDULE_TOPIC_XXXX", "payments-eu", "RMQ_SYS_TRACE_TOPIC")) {
            topics.getTopicList().add(t);
        }
        write("topic_list.default", topics.encode());
        topics.setBrokerAddr("10.0.0.1:10911");
        write("topic_list_with_addr.default", topics.encode());

        KVTable kv = new KVTable();
        HashMap<String, String> table = new HashMap<>();
        for (String k : List.of("brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning", "putTps",
            "getTransferedTps", "commitLogDiskRatio", "sendThreadPoolQueueHeadWaitTimeMills", "bootTimestamp",
            "earliestMessageTimeStamp", "dispatchBehindBytes", "pageCacheLockTimeMills", "runtime",
            "commitLogMaxOffset", "commitLogMinOffset", "remainHowManyDataToFlush", "EndTransactionQueueSize")) {
            table.put(k, k.length() + "");
        }
        kv.setTable(table);
        write("kv_table.default", kv.encode());

        ConsumeStats stats = new ConsumeStats();
        for (int q = 0; q < 6; q++) {
            OffsetWrapper w = new OffsetWrapper();
            w.setBrokerOffset(1000 + q);
            w.setConsumerOffset(900 + q);
            w.setLastTimestamp(1700000000000L + q);
            stats.getOffsetTable().put(new MessageQueue(q % 2 == 0 ? "orders" : "%RETRY%g", "broker-" + (char) ('a' + q % 3), q), w);
        }
        stats.setConsumeTps(12.5);
        write("consume_stats.default", stats.encode());

        TopicStatsTable tst = new TopicStatsTable();
        for (int q = 0; q < 4; q++) {
            TopicOffset o = new TopicOffset();
            o.setMinOffset(q);
            o.setMaxOffset(100 + q);
            o.setLastUpdateTimestamp(1700000000000L + q);
            tst.getOffsetTable().put(new MessageQueue("orders", "broker-a", q), o);
        }
        write("topic_stats.default", tst.encode());

        LockBatchResponseBody locked = new LockBatchResponseBody();
        for (int q = 0; q < 5; q++) locked.getLockOKMQSet().add(new MessageQueue("orders", "broker-a", q));
        write("lock_batch_response.default", locked.encode());

        ConsumerOffsetSerializeWrapper offsets = new ConsumerOffsetSerializeWrapper();
        offsets.setOffsetTable(new ConcurrentHashMap<>(512));  // as ConsumerOffsetManager builds them
        for (String key : List.of("orders@g1", "%RETRY%g1@g1", "payments@g2")) {
            ConcurrentMap<Integer, Long> m = new ConcurrentHashMap<>(32);
            for (int q = 0; q < 4; q++) m.put(q, 10L * q + key.length());
            offsets.getOffsetTable().put(key, m);
        }
        write("consumer_offsets.default", offsets.encode());

        ResetOffsetBody reset = new ResetOffsetBody();
        Map<MessageQueue, Long> resetTable = new HashMap<>();
        for (int q = 0; q < 3; q++) resetTable.put(new MessageQueue("orders", "broker-a", q), 50L + q);
        reset.setOffsetTable(resetTable);
        write("reset_offset.default", reset.encode());

        TopicConfigSerializeWrapper topicConfigs = new TopicConfigSerializeWrapper();
        DataVersion version = new DataVersion();
        version.setTimestamp(1700000000123L);
        version.getCounter().set(7);
        topicConfigs.setDataVersion(version);
        topicConfigs.setTopicConfigTable(new ConcurrentHashMap<>(1024));  // TopicConfigManager's table
        for (String t : List.of("orders", "TBW102", "payments-eu", "%RETRY%g1", "SCHEDULE_TOPIC_XXXX", "DefaultCluster",
            "broker-a", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "RMQ_SYS_TRACE_TOPIC", "t1", "t2")) {
            TopicConfig tc = new TopicConfig(t, 4, 4, 6);
            topicConfigs.getTopicConfigTable().put(t, tc);
        }
        write("topic_config_wrapper.default", topicConfigs.encode());

        SubscriptionGroupWrapper groups = new SubscriptionGroupWrapper();
        groups.setDataVersion(version);
        groups.setSubscriptionGroupTable(new ConcurrentHashMap<>(1024));  // SubscriptionGroupManager's table
        for (String g : List.of("g1", "TOOLS_CONSUMER", "payments-group")) {
            SubscriptionGroupConfig sg = new SubscriptionGroupConfig();
            sg.setGroupName(g);
            groups.getSubscriptionGroupTable().put(g, sg);
        }
        write("subscription_group_wrapper.default", groups.encode());

        write("data_version.default", version.encode());

        ConsumerConnection cc = new ConsumerConnection();
        Connection conn = new Connection();
        conn.setClientId("10.0.0.7@12345");
        conn.setClientAddr("10.0.0.7:50000");
        conn.setLanguage(org.apache.rocketmq.remoting.protocol.LanguageCode.PYTHON);
        conn.setVersion(409);
        cc.getConnectionSet().add(conn);
        for (String t : List.of("orders", "%RETRY%g1", "payments-eu")) {
            SubscriptionData sd = new SubscriptionData();
            sd.setTopic(t);
            sd.setSubString("TagA || TagB || 集");
            for (String tag : List.of("TagA", "TagB", "集")) { sd.getTagsSet().add(tag); sd.getCodeSet().add(tag.hashCode()); }
            sd.setSubVersion(1700000000000L);
            cc.getSubscriptionTable().put(t, sd);
        }
        cc.setConsumeType(org.apache.rocketmq.common.protocol.heartbeat.ConsumeType.CONSUME_PASSIVELY);
        cc.setMessageModel(MessageModel.CLUSTERING);
        cc.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        write("consumer_connection.default", cc.encode());
        TopicRouteData big = new TopicRouteData();
        big.setQueueDatas(new ArrayList<>(List.of(queue("broker-a", 4, 6))));
        HashMap<Long, String> addrs = new HashMap<>();
        addrs.put(0L, "héllo\t\"quoted\" \u2028 / < > 集");
        addrs.put(9007199254740993L, "big-id");
        big.setBrokerDatas(new ArrayList<>(List.of(new BrokerData("C", "b", addrs))));
        big.setFilterServerTable(new HashMap<>());
        write("route_escapes.default", RemotingSerializable.encode(big));
        write("route_escapes.standard", big.encode(SerializerFeature.BrowserCompatible, SerializerFeature.QuoteFieldNames,
            SerializerFeature.SkipTransientField, SerializerFeature.MapSortField));
    }
}
