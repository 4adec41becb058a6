#!/usr/bin/env bash
# Measures what heavy management requests cost a broker: time, size and the
# broker's RSS for GET /api/queues and GET /metrics over many queues, a few
# of them at once, and a large body sent to a vhost that does not exist.
# Run by hand, not in CI; every request is bounded in time and count, and
# everything listens on 127.0.0.1 only.
#
#   scripts/mgmt-probe.sh [REV]      # REV: a git revision to build (default: the work tree)
#
# QUEUES (default 100000), CONCURRENT (default 8) and BODY_MB (default 60)
# change the load; PORT (default 25700) is the first of two ports used;
# WARREN_FLAGS are added to the broker's command line (e.g.
# "--gc-memory-limit 0": with 100,000 queues the live heap is near the
# default 192 MB soft limit, and the collector then runs all the time).
set -euo pipefail

rev=${1:-}
queues=${QUEUES:-100000}
concurrent=${CONCURRENT:-8}
body_mb=${BODY_MB:-60}
port=${PORT:-25700}
amqp_port=$port mgmt_port=$((port + 1))
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
pid=
cleanup() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
	git -C "$root" worktree prune
}
trap cleanup EXIT

if [[ -n $rev ]]; then
	git -C "$root" worktree add -q --detach "$tmp/src" "$rev"
	(cd "$tmp/src" && go build -o "$tmp/warren" ./cmd/warren)
	git -C "$root" worktree remove --force "$tmp/src"
else
	(cd "$root" && go build -o "$tmp/warren" ./cmd/warren)
fi

"$tmp/warren" --listen 127.0.0.1:$amqp_port --mgmt-listen 127.0.0.1:$mgmt_port --prometheus-listen off \
	--data-dir "$tmp/data" --log-level warn ${WARREN_FLAGS:-} 2>"$tmp/log" &
pid=$!
base=http://127.0.0.1:$mgmt_port
for _ in $(seq 100); do
	curl -sf -u guest:guest "$base/api/overview" >/dev/null 2>&1 && break
	sleep 0.1
done

rss() { awk -v k="$1:" '$1 == k { printf "%d MB", $2 / 1024 }' /proc/$pid/status; }
# req LABEL CURL-ARGS...: one bounded request, with its status, size and time.
req() {
	local label=$1
	shift
	curl -s -o /dev/null --max-time 120 -w "$label: %{http_code}, %{size_download} bytes, %{time_total} s\n" "$@" || echo "$label: failed"
}

python3 - "$queues" >"$tmp/defs.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"queues": [{"name": "probe-%06d" % i, "vhost": "/", "durable": False,
                              "auto_delete": False, "arguments": {}} for i in range(n)]}))
EOF
echo "revision: ${rev:-work tree}; $queues queues"
req "import $queues queues" -u guest:guest -H 'Content-Type: application/json' --data-binary @"$tmp/defs.json" "$base/api/definitions"
echo "RSS after import: $(rss VmRSS)"

req "GET /api/queues" -u guest:guest "$base/api/queues"
echo "RSS $(rss VmRSS), peak $(rss VmHWM)"
req "GET /api/queues?page=1&page_size=100&sort=name" -u guest:guest "$base/api/queues?page=1&page_size=100&sort=name"
req "GET /metrics" "$base/metrics"
req "GET /metrics/per-object" -u guest:guest "$base/metrics/per-object"
echo "RSS $(rss VmRSS), peak $(rss VmHWM)"

start=$(date +%s.%N)
for _ in $(seq "$concurrent"); do
	req "  concurrent GET /api/queues" -u guest:guest "$base/api/queues" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
echo "$concurrent at once: $(echo "$(date +%s.%N) - $start" | bc) s; RSS $(rss VmRSS), peak $(rss VmHWM)"

head -c $((body_mb << 20)) /dev/zero | tr '\0' ' ' >"$tmp/body"
printf '{}' >>"$tmp/body"
req "POST ${body_mb} MB to /api/definitions/nosuch" -u guest:guest -H 'Content-Type: application/json' \
	--data-binary @"$tmp/body" "$base/api/definitions/nosuch"
echo "RSS $(rss VmRSS), peak $(rss VmHWM)"
kill -0 "$pid" && echo "broker alive"
