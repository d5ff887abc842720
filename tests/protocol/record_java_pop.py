"""Record what Apache RocketMQ 5.3.3 writes for POP, for the golden tests of ``protocol/pop.py``.

Takes 5.3.3's own classes from a git checkout of apache/rocketmq (the revive topic's JSON, the
BATCH_ACK_MESSAGE body, ExtraInfoUtil, KeyBuilder, ReceiptHandle; the QUERY_ASSIGNMENT and
SET_MESSAGE_REQUEST_MODE bodies, messageRequestMode.json, PopProcessQueueInfo), compiles them with
``tests/protocol/java/pop/*.java`` against ``../shared/java-rocketmq`` (fastjson, and 4.9.8's
RemotingSerializable, unchanged in 5.x) and runs ``GoldenPop`` and ``GoldenAssignment``, which write
``tests/protocol/data/java/pop/*``.

    python tests/protocol/record_java_pop.py [path/to/rocketmq.git] [path/to/java-rocketmq]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TAG = "rocketmq-all-5.3.3"
SOURCES = (
    "store/src/main/java/org/apache/rocketmq/store/pop/AckMsg.java",
    "store/src/main/java/org/apache/rocketmq/store/pop/BatchAckMsg.java",
    "store/src/main/java/org/apache/rocketmq/store/pop/PopCheckPoint.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/BatchAck.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/BatchAckMessageRequestBody.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/BitSetSerializerDeserializer.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/ExtraInfoUtil.java",
    "common/src/main/java/org/apache/rocketmq/common/KeyBuilder.java",
    "common/src/main/java/org/apache/rocketmq/common/PopAckConstants.java",
    "common/src/main/java/org/apache/rocketmq/common/consumer/ReceiptHandle.java",
    # QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE (GoldenAssignment)
    "common/src/main/java/org/apache/rocketmq/common/message/MessageQueueAssignment.java",
    "common/src/main/java/org/apache/rocketmq/common/message/MessageRequestMode.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/heartbeat/MessageModel.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/MessageRequestModeSerializeWrapper.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/PopProcessQueueInfo.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/QueryAssignmentRequestBody.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/QueryAssignmentResponseBody.java",
    "remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/SetMessageRequestModeRequestBody.java",
)
MAINS = ("GoldenPop", "GoldenAssignment")


def main(argv: list[str]) -> int:
    git_dir = Path(
        argv[1] if len(argv) > 1 else os.environ.get("ROCKETMQ_GIT", "/work/.mirror/apache+rocketmq/repo")
    )
    home = Path(argv[2]) if len(argv) > 2 else REPO.parent / "shared" / "java-rocketmq"
    classpath_file = Path(os.environ.get("TMPDIR", "/tmp")) / "rocketmq-java.classpath"
    if not classpath_file.exists():
        subprocess.run([str(home / "setup.sh")], check=True)
    classpath = classpath_file.read_text().strip()
    out = HERE / "data" / "java" / "pop"
    with tempfile.TemporaryDirectory() as work:
        src = Path(work) / "src"
        for path in SOURCES:
            target = src / path.split("/src/main/java/", 1)[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(
                subprocess.run(
                    ["git", "-C", str(git_dir), "show", f"{TAG}:{path}"], check=True, capture_output=True
                ).stdout
            )
        classes = Path(work) / "classes"
        java = [str(p) for p in src.rglob("*.java")] + [
            str(p) for p in (HERE / "java" / "pop").glob("*.java")
        ]
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(classes), *java], check=True)
        for main_class in MAINS:
            subprocess.run(["java", "-cp", f"{classpath}:{classes}", main_class, str(out)], check=True)
    print(f"recorded {len(list(out.iterdir()))} files into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
