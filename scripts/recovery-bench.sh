#!/usr/bin/env bash
# Recovery time: fill N persistent messages over Q durable queues, kill the
# broker with SIGKILL, start it again and time (a) until it accepts
# connections and (b) until a consumer gets the first message.
# Usage: scripts/recovery-bench.sh [N] [Q]   (defaults 1000000 100)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
Q=${2:-100}
PORT=${PORT:-5691}
DATA=$(mktemp -d /tmp/warren-recovery.XXXXXX)
go build -o /tmp/warren-rb ./cmd/warren
go build -o /tmp/warren-backlog-rb ./cmd/warren-backlog
go build -o /tmp/warren-firstmsg ./scripts/firstmsg
URL="amqp://guest:guest@127.0.0.1:$PORT/"

/tmp/warren-rb --listen 127.0.0.1:$PORT --mgmt-listen off --prometheus-listen off --data-dir "$DATA" --log-level warn &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$DATA"' EXIT
until (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; do sleep 0.1; done
/tmp/warren-backlog-rb --url "$URL" --count "$N" --queues "$Q" --queue recovery --fill-only >/dev/null
kill -9 $pid; wait $pid 2>/dev/null || true

start=$(date +%s.%N)
/tmp/warren-rb --listen 127.0.0.1:$PORT --mgmt-listen off --prometheus-listen off --data-dir "$DATA" --log-level warn &
pid=$!
until (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; do sleep 0.01; done
accept=$(date +%s.%N)
/tmp/warren-firstmsg --url "$URL" --queue recovery-0
first=$(date +%s.%N)
echo "{\"messages\": $N, \"queues\": $Q, \"accept_seconds\": $(awk "BEGIN{print $accept - $start}"), \"first_message_seconds\": $(awk "BEGIN{print $first - $start}"), \"data_dir_mb\": $(du -sm "$DATA" | cut -f1)}"
