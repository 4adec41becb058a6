"""Smoke test over amqps with an unmodified Python client (Debian
python3-pika): connect with TLS, verifying the broker's certificate against
a CA, publish one message and consume it.

    /usr/bin/python3 clients/pika_tls_smoke.py --port 5671 --ca ca.pem
    /usr/bin/python3 clients/pika_tls_smoke.py --port 5671 --ca ca.pem \\
        --cert client.pem --key client.key --external

Password login (guest/guest unless --user/--password) by default; with
--external the client certificate logs in (SASL EXTERNAL)."""
import argparse
import ssl
import sys

import pika

ap = argparse.ArgumentParser()
ap.add_argument('--host', default='127.0.0.1')
ap.add_argument('--port', type=int, default=5671)
ap.add_argument('--ca', required=True, help='CA file that signed the broker certificate')
ap.add_argument('--server-name', default='localhost', help='name checked against the broker certificate')
ap.add_argument('--cert', help='client certificate (PEM)')
ap.add_argument('--key', help='client private key (PEM)')
ap.add_argument('--external', action='store_true', help='log in with the client certificate')
ap.add_argument('--user', default='guest')
ap.add_argument('--password', default='guest')
args = ap.parse_args()

ctx = ssl.create_default_context(cafile=args.ca)
ctx.minimum_version = ssl.TLSVersion.TLSv1_2
if args.cert:
    ctx.load_cert_chain(args.cert, args.key)
creds = pika.credentials.ExternalCredentials() if args.external else pika.PlainCredentials(args.user, args.password)
params = pika.ConnectionParameters(
    host=args.host, port=args.port, credentials=creds,
    ssl_options=pika.SSLOptions(ctx, server_hostname=args.server_name),
    connection_attempts=1, socket_timeout=5, blocked_connection_timeout=10)
conn = pika.BlockingConnection(params)
try:  # pika's internals: informative only
    sock = conn._impl._transport._sock
    print('pika TLS:', sock.version(), sock.cipher()[0], 'EXTERNAL' if args.external else 'PLAIN')
except AttributeError:
    pass

ch = conn.channel()
q = ch.queue_declare('', exclusive=True).method.queue
ch.confirm_delivery()
ch.basic_publish('', q, b'over TLS', pika.BasicProperties(content_type='text/plain'))
got = []


def on_msg(c, method, props, body):
    got.append(body)
    c.basic_ack(method.delivery_tag)
    c.stop_consuming()


ch.basic_consume(q, on_msg)
conn.call_later(5, ch.stop_consuming)
ch.start_consuming()
conn.close()
print('pika TLS got:', got)
if got != [b'over TLS']:
    sys.exit('pika TLS smoke: expected one message "over TLS"')
