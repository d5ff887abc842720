// Writes what Apache RocketMQ 5.3.3 writes for QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE (fastjson
// 1.2.x default features), for finchmq's golden tests: the request and response bodies, the
// messageRequestMode.json of MessageRequestModeManager (its only property is the map the wrapper holds)
// and a consumer's PopProcessQueueInfo. Run by tests/protocol/record_java_pop.py; each result goes to
// OUT/<name>.
import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.*;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageQueueAssignment;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.body.MessageRequestModeSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.body.PopProcessQueueInfo;
import org.apache.rocketmq.remoting.protocol.body.QueryAssignmentRequestBody;
import org.apache.rocketmq.remoting.protocol.body.QueryAssignmentResponseBody;
import org.apache.rocketmq.remoting.protocol.body.SetMessageRequestModeRequestBody;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

public class GoldenAssignment {
    static Path out;

    static void write(String name, String text) throws Exception {
        Files.write(out.resolve(name), text.getBytes(StandardCharsets.UTF_8));
    }

    static SetMessageRequestModeRequestBody mode(String topic, String group, MessageRequestMode mode, int share) {
        SetMessageRequestModeRequestBody body = new SetMessageRequestModeRequestBody();
        body.setTopic(topic);
        body.setConsumerGroup(group);
        body.setMode(mode);
        body.setPopShareQueueNum(share);
        return body;
    }

    public static void main(String[] args) throws Exception {
        out = Paths.get(args[0]);
        Files.createDirectories(out);

        // MQClientAPIImpl.queryAssignment
        QueryAssignmentRequestBody request = new QueryAssignmentRequestBody();
        request.setTopic("TopicA");
        request.setConsumerGroup("GID_pop");
        request.setClientId("10.0.0.1@1234");
        request.setMessageModel(MessageModel.CLUSTERING);
        request.setStrategyName("AVG");
        write("query_assignment_request.json", new String(request.encode(), StandardCharsets.UTF_8));

        // QueryAssignmentProcessor.queryAssignment: one POP assignment (queue -1) per broker
        Set<MessageQueueAssignment> assignments = new HashSet<>();
        MessageQueueAssignment pop = new MessageQueueAssignment();
        pop.setMessageQueue(new MessageQueue("TopicA", "broker-a", -1));
        pop.setMode(MessageRequestMode.POP);
        assignments.add(pop);
        QueryAssignmentResponseBody response = new QueryAssignmentResponseBody();
        response.setMessageQueueAssignments(assignments);
        write("query_assignment_response.json", new String(response.encode(), StandardCharsets.UTF_8));
        QueryAssignmentResponseBody empty = new QueryAssignmentResponseBody();
        write("query_assignment_response_null.json", new String(empty.encode(), StandardCharsets.UTF_8));

        // DefaultMQAdminExtImpl.setMessageRequestMode
        SetMessageRequestModeRequestBody set = mode("TopicA", "GID_pop", MessageRequestMode.POP, 2);
        write("set_message_request_mode.json", new String(set.encode(), StandardCharsets.UTF_8));

        // MessageRequestModeManager.encode(): {"messageRequestModeMap":{topic:{group:body}}}
        MessageRequestModeSerializeWrapper wrapper = new MessageRequestModeSerializeWrapper();
        ConcurrentHashMap<String, ConcurrentHashMap<String, SetMessageRequestModeRequestBody>> map =
            new ConcurrentHashMap<>();
        for (String topic : new String[] {"TopicA", "TopicB", "orders"}) {
            ConcurrentHashMap<String, SetMessageRequestModeRequestBody> groups = new ConcurrentHashMap<>();
            for (String group : new String[] {"GID_pop", "GID_pull", "billing"}) {
                groups.put(group, mode(topic, group,
                    group.equals("GID_pull") ? MessageRequestMode.PULL : MessageRequestMode.POP, 0));
            }
            map.put(topic, groups);
        }
        wrapper.setMessageRequestModeMap(map);
        write("message_request_mode.json", wrapper.toJson(false));

        // DefaultMQPushConsumerImpl.consumerRunningInfo: a popped queue's info
        PopProcessQueueInfo info = new PopProcessQueueInfo();
        info.setWaitAckCount(7);
        info.setDroped(false);
        info.setLastPopTimestamp(1700000000123L);
        write("pop_process_queue_info.json", JSON.toJSONString(info));
        write("pop_process_queue_info.txt", info.toString());
    }
}
