#!/usr/bin/python3
"""One worker of a Warren consumer group over a partitioned stream, with pika.

Start two: the broker splits the stream's partitions between them, and each
resumes at the group's committed offset after a restart.

    /usr/bin/python3 examples/streams/group_worker.py w1
    /usr/bin/python3 examples/streams/group_worker.py w2
    /usr/bin/python3 examples/streams/group_worker.py --publish 100
"""
import os
import sys

import pika

params = pika.URLParameters(os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"))
conn = pika.BlockingConnection(params)
ch = conn.channel()
ch.queue_declare("orders", durable=True,
                 arguments={"x-queue-type": "stream", "x-stream-partitions": 4})

if sys.argv[1:2] == ["--publish"]:
    ch.confirm_delivery()
    n = int(sys.argv[2])
    for i in range(n):
        customer = "customer-%d" % (i % 10)
        # Messages with one key go to one partition, in order.
        ch.basic_publish("", "orders", ("order %d of %s" % (i, customer)).encode(),
                         pika.BasicProperties(headers={"x-stream-partition-key": customer}))
    print("published %d orders" % n)
    conn.close()
    sys.exit(0)

name = sys.argv[1] if len(sys.argv) > 1 else "worker"


def on_message(ch, method, props, body):
    h = props.headers
    print("%s: partition %s offset %s: %s" % (name, h["x-stream-partition"], h["x-stream-offset"], body.decode()))
    ch.basic_ack(method.delivery_tag)  # moves the group's committed offset


ch.basic_qos(prefetch_count=50)  # a stream needs a prefetch per consumer
ch.basic_consume("orders", on_message, consumer_tag=name, arguments={
    "x-stream-group": "billing",  # join the group "billing"
    "x-stream-offset": "first",   # where a partition the group never committed starts
})
try:
    ch.start_consuming()
except KeyboardInterrupt:
    conn.close()
