"""Smoke test with an unmodified Python client (Debian python3-pika):
declare, bind, publish with confirms, consume with prefetch and ack."""
import os

import pika
params = pika.ConnectionParameters(host='127.0.0.1', port=int(os.environ.get('AMQP_PORT', '5672')), credentials=pika.PlainCredentials('guest', 'guest'))
conn = pika.BlockingConnection(params)
ch = conn.channel()
ch.exchange_declare('pika-x', exchange_type='topic', durable=False, auto_delete=True)
q = ch.queue_declare('', exclusive=True).method.queue
ch.queue_bind(q, 'pika-x', routing_key='orders.#')
ch.confirm_delivery()
for i in range(5):
    ch.basic_publish('pika-x', 'orders.eu.new', ('msg %d' % i).encode(), pika.BasicProperties(content_type='text/plain', delivery_mode=2, headers={'n': i}))
got = []
def on_msg(c, method, props, body):
    got.append((body.decode(), props.headers))
    c.basic_ack(method.delivery_tag)
    if len(got) == 5:
        c.stop_consuming()
ch.basic_qos(prefetch_count=2)
ch.basic_consume(q, on_msg)
conn.call_later(5, ch.stop_consuming)
ch.start_consuming()
print("pika got:", got)
assert len(got) == 5
conn.close()
