#!/usr/bin/env bash
# The amqps listener of the built broker, checked with real clients: a
# throwaway CA, server and client certificate made with openssl; the broker
# started with --tls-listen/--tls-cert/--tls-key/--tls-ca; openssl s_client
# completes a TLS 1.2 handshake and is refused TLS 1.1; connection.start
# offers EXTERNAL only to a client with a verified certificate; a plain AMQP
# client on the TLS port is dropped and the broker keeps serving; the pika
# TLS smoke test passes with a password and with EXTERNAL. Exits non-zero on
# any failure.
# Usage: scripts/tls-check.sh   (WARREN_BIN=path skips the build; TLS_PORT,
# AMQP_PORT, MGMT_PORT choose the ports, else free ones from 5691, 5681,
# 15691)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/warren-tls.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "tls-check FAILED: $*" >&2
  [ -f "$dir/warren.log" ] && { echo "--- broker log" >&2; tail -n 30 "$dir/warren.log" >&2; }
  exit 1
}
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p=$1
  while listening "$p"; do p=$((p + 1)); done
  echo "$p"
}
TLS_PORT=${TLS_PORT:-$(free_port 5691)}
AMQP_PORT=${AMQP_PORT:-$(free_port 5681)}
MGMT_PORT=${MGMT_PORT:-$(free_port 15691)}

if [ -z "${WARREN_BIN:-}" ]; then
  WARREN_BIN=$dir/warren
  go build -o "$WARREN_BIN" ./cmd/warren
fi

# A CA, a server certificate for localhost/127.0.0.1 and a client
# certificate whose Common Name is the user it logs in as (guest).
(
  cd "$dir"
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=warren tls-check CA" \
    -keyout ca.key -out ca.pem
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
    -extfile server.ext -out server.pem
  openssl req -newkey rsa:2048 -nodes -subj "/CN=guest" -keyout client.key -out client.csr
  printf 'extendedKeyUsage=clientAuth\n' >client.ext
  openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
    -extfile client.ext -out client.pem
) >"$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; fail "making certificates"; }

"$WARREN_BIN" --listen "127.0.0.1:$AMQP_PORT" --mgmt-listen "127.0.0.1:$MGMT_PORT" --prometheus-listen off \
  --tls-listen "127.0.0.1:$TLS_PORT" --tls-cert "$dir/server.pem" --tls-key "$dir/server.key" \
  --tls-ca "$dir/ca.pem" --data-dir "$dir/data" --log-level debug >"$dir/warren.log" 2>&1 &
pid=$!
for i in $(seq 1 100); do
  listening "$TLS_PORT" && break
  kill -0 "$pid" 2>/dev/null || fail "broker exited at start-up"
  sleep 0.1
done
listening "$TLS_PORT" || fail "broker not listening on $TLS_PORT"
echo "warren amqps on 127.0.0.1:$TLS_PORT (amqp $AMQP_PORT, mgmt $MGMT_PORT)"

s_client() {
  timeout 10 openssl s_client -connect "127.0.0.1:$TLS_PORT" -servername localhost -CAfile "$dir/ca.pem" "$@"
}

# TLS 1.2 handshake with the broker certificate verified.
out=$(s_client -tls1_2 -verify_return_error -brief </dev/null 2>&1) || { echo "$out"; fail "TLS 1.2 handshake"; }
grep -q "Protocol version: TLSv1.2" <<<"$out" || { echo "$out"; fail "TLS 1.2 not negotiated"; }
echo "ok: openssl s_client -tls1_2 handshake"

# TLS 1.1 is refused by the broker (SECLEVEL=0 lets this openssl offer it).
if out=$(s_client -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0' -brief </dev/null 2>&1); then
  echo "$out"; fail "TLS 1.1 handshake completed"
fi
grep -qi "protocol version" <<<"$out" || { echo "$out"; fail "TLS 1.1 not refused by the broker"; }
echo "ok: openssl s_client -tls1_1 refused"

# connection.start's mechanisms, with and without a client certificate.
mechanisms() {
  { printf 'AMQP\0\0\x09\x01'; sleep 1; } | s_client -brief "$@" 2>/dev/null | tr -c '[:print:]' '\n' | grep PLAIN || true
}
m=$(mechanisms -cert "$dir/client.pem" -key "$dir/client.key")
[ "$m" = "AMQPLAIN PLAIN EXTERNAL" ] || fail "mechanisms with a client certificate: '$m'"
m=$(mechanisms)
[ "$m" = "AMQPLAIN PLAIN" ] || fail "mechanisms without a client certificate: '$m'"
echo "ok: EXTERNAL offered only with a verified client certificate"

# Plain AMQP and garbage on the TLS port: dropped, the broker keeps serving.
printf 'AMQP\0\0\x09\x01' | timeout 5 bash -c "cat >/dev/tcp/127.0.0.1/$TLS_PORT" || true
printf 'GET / HTTP/1.0\r\n\r\n' | timeout 5 bash -c "cat >/dev/tcp/127.0.0.1/$TLS_PORT" || true
sleep 0.2
kill -0 "$pid" 2>/dev/null || fail "broker died after a plain client on the TLS port"
echo "ok: plain AMQP on the TLS port dropped"

/usr/bin/python3 clients/pika_tls_smoke.py --port "$TLS_PORT" --ca "$dir/ca.pem" || fail "pika over TLS (PLAIN)"
/usr/bin/python3 clients/pika_tls_smoke.py --port "$TLS_PORT" --ca "$dir/ca.pem" \
  --cert "$dir/client.pem" --key "$dir/client.key" --external || fail "pika over TLS (EXTERNAL)"

kill -0 "$pid" 2>/dev/null || fail "broker died"
grep -q "panic" "$dir/warren.log" && fail "panic in the broker log"
echo "tls-check ok"
