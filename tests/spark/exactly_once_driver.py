"""A Spark driver for ``test_exactly_once_kill``, run as its own process (the test SIGKILLs it):
topic -> upper-cased body -> topic with the exactly-once sink, 6 rows a micro-batch, from the
checkpoint given; runs until killed.

    python tests/spark/exactly_once_driver.py NAMESRV SOURCE TARGET CHECKPOINT
"""

from __future__ import annotations

import sys

from pyspark.sql import functions as F

from finchmq.spark import local_session


def main(namesrv: str, source: str, target: str, checkpoint: str) -> None:
    spark = local_session("finchmq-exactly-once-driver", cores=2, task_attempts=2)
    frame = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "6")
        .load()
        .select(F.upper(F.col("body").cast("string")).alias("body"))
    )
    query = (
        frame.writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", target)
        .option("delivery", "exactly-once")
        # The broker checks an orphan half this long after its send: the test waits that long
        # after its last kill. A batch must reach its commit within half of it (15 s) from its
        # first send, which a first batch on a loaded machine does with room to spare.
        .option("transactionTimeoutMs", "30000")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    print(f"started {query.id}", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
