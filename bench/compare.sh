#!/usr/bin/env bash
# compare.sh runs the Warren-vs-RabbitMQ scenario set with cmd/warren-perf,
# alternating brokers (W R W R W R), and prints a markdown table of the
# median of each figure per scenario and broker, with the Warren/RabbitMQ
# ratio.
#
# Usage: bench/compare.sh [scenario ...]      (default: s1-s8; names below;
#                                             "st" = the stream scenarios,
#                                             "groups" = sg smem s100 s100.1 s100.0,
#                                             "qq" the quorum ones, run
#                                             only when named)
#
# Environment:
#   ROUNDS=3          rounds per scenario (each round runs both brokers)
#   QUICK=1           smoke run: 1 round, short scenarios (~3 min)
#   DUR=10            seconds of load per scenario (QUICK: 3)
#   CONNS=800         idle connections for s8 (RabbitMQ's default fd limit
#                     of 1024 allows ~830 sockets)
#   STREAM_N=1000000  stream scenarios: messages replayed by str, and the
#                     count bound per producer of st1/st4/ste/sg (QUICK: 100000)
#   STREAM_BIG=10000000  smem: messages in the stream (QUICK: 1000000)
#   RUN_TIMEOUT=240   seconds a run may take (smem: at least 900)
#   LEAN=1            stream, group and quorum scenarios consume and publish with
#                     warren-perf's --lean-consumer and --lean-publisher (AMQP
#                     with Warren's codec, one goroutine per consumer, one
#                     buffer per producer) on both brokers; LEAN=0: amqp091-go
#                     clients, the client limit of runs before session 7
#                     (consumers) and session 9 (producers)
#   WARREN_URL, RABBIT_URL   broker URLs
#   WARREN_PID        pid of a running Warren at WARREN_URL; if unset, the
#                     script builds Warren from the git HEAD of the checkout
#                     into a temp dir and starts it on 127.0.0.1:5680
#   RABBIT_PID        RabbitMQ's OS pid (default: pgrep beam.smp)
#   FRESH_WARREN=1    restart the script-started Warren before each of its
#                     runs (0: one Warren process for the whole run)
#   OUT=dir           where per-run JSON files go (default: a temp dir)
#   UPDATE_MD=1       also replace the results section of BENCHMARKS.md
#   BASE_REV=rev      compare Warren with Warren built from git revision rev
#                     instead of RabbitMQ (both with Warren's arguments,
#                     where a scenario has RabbitMQ's own; before/after a
#                     change, alternating
#                     the same way; the base runs on 127.0.0.1:$BASE_PORT,
#                     default 5681, restarted like the other per run)
# The whole script is one compound command, so that bash has parsed all of
# it before it starts: editing the file during a run cannot break the run.
{
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
	ROUNDS=${ROUNDS:-1}
	DUR=${DUR:-3}
	STREAM_N=${STREAM_N:-100000}
	STREAM_BIG=${STREAM_BIG:-1000000}
else
	ROUNDS=${ROUNDS:-3}
	DUR=${DUR:-10}
fi
CONNS=${CONNS:-800}
STREAM_N=${STREAM_N:-1000000}
STREAM_BIG=${STREAM_BIG:-10000000}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
FRESH_WARREN=${FRESH_WARREN:-1}
WARREN_PORT=${WARREN_PORT:-5680}
WARREN_URL=${WARREN_URL:-amqp://guest:guest@127.0.0.1:$WARREN_PORT/}
RABBIT_URL=${RABBIT_URL:-amqp://guest:guest@127.0.0.1:5672/}
RABBIT_PID_AUTO=0
if [[ -z ${RABBIT_PID:-} ]]; then
	RABBIT_PID=$(pgrep -f beam.smp | head -1)
	RABBIT_PID_AUTO=1
fi
OUT=${OUT:-$(mktemp -d /tmp/warren-bench.XXXXXX)}
mkdir -p "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

BASE_REV=${BASE_REV:-}
BASE_PORT=${BASE_PORT:-5681}
LABEL_A=Warren LABEL_B=RabbitMQ RATIO="W/R"
if [[ -n $BASE_REV ]]; then
	LABEL_A="Warren HEAD" LABEL_B="Warren $BASE_REV" RATIO="HEAD/base"
	RABBIT_URL=amqp://guest:guest@127.0.0.1:$BASE_PORT/
elif [[ -z $RABBIT_PID ]]; then
	log "RabbitMQ is not running (no beam.smp); start it with: rabbitmq-server &"
	exit 1
fi

# Tools: built from the checkout's HEAD so that half-edited files of
# other people do not break the run.
SRC=$(mktemp -d /tmp/warren-bench-src.XXXXXX)
(cd "$ROOT" && git archive HEAD | tar -x -C "$SRC")
COMMIT=$(cd "$ROOT" && git rev-parse --short HEAD)
PERF=$SRC/warren-perf
(cd "$SRC" && go build -o "$PERF" ./cmd/warren-perf) || { log "build warren-perf failed"; exit 1; }

STARTED_WARREN=
STARTED_BASE=
DATADIRS=()
# start_base starts Warren built from BASE_REV, fresh, as the second broker.
start_base() {
	if [[ ! -x $SRC_BASE/warren ]]; then
		SRC_BASE=$(mktemp -d /tmp/warren-bench-base.XXXXXX)
		(cd "$ROOT" && git archive "$BASE_REV" | tar -x -C "$SRC_BASE")
		(cd "$SRC_BASE" && go build -o "$SRC_BASE/warren" ./cmd/warren) || { log "build of $BASE_REV failed"; exit 1; }
	fi
	if [[ -n $STARTED_BASE ]]; then
		kill "$STARTED_BASE" 2>/dev/null
		wait "$STARTED_BASE" 2>/dev/null
	fi
	local dd
	dd=$(mktemp -d /tmp/warren-bench-data.XXXXXX)
	DATADIRS+=("$dd")
	# Flags every revision since the benchmark script exists takes.
	"$SRC_BASE/warren" --listen 127.0.0.1:"$BASE_PORT" --mgmt-listen off --data-dir "$dd" --log-level warn >>"$OUT/base.log" 2>&1 &
	RABBIT_PID=$!
	STARTED_BASE=$RABBIT_PID
	sleep 1
	if ! kill -0 "$RABBIT_PID" 2>/dev/null; then
		log "Warren $BASE_REV did not start; see $OUT/base.log"
		exit 1
	fi
}
SRC_BASE=
start_warren() {
	if [[ ! -x $SRC/warren ]]; then
		(cd "$SRC" && go build -o "$SRC/warren" ./cmd/warren) || { log "build warren failed"; exit 1; }
	fi
	local dd
	dd=$(mktemp -d /tmp/warren-bench-data.XXXXXX)
	DATADIRS+=("$dd")
	if (: </dev/tcp/127.0.0.1/"$WARREN_PORT") 2>/dev/null; then
		log "port $WARREN_PORT is already taken; stop that broker or pass WARREN_PID/WARREN_URL"
		exit 1
	fi
	local extra=()
	# Against a base build both run without the management API (the
	# base's default port would be taken by this one's).
	[[ -n $BASE_REV ]] && extra=(--mgmt-listen off)
	"$SRC/warren" --listen 127.0.0.1:"$WARREN_PORT" --prometheus-listen off "${extra[@]}" --data-dir "$dd" --log-level warn >>"$OUT/warren.log" 2>&1 &
	WARREN_PID=$!
	STARTED_WARREN=$WARREN_PID
	sleep 1
	if ! kill -0 "$WARREN_PID" 2>/dev/null; then
		log "Warren did not start; see $OUT/warren.log"
		exit 1
	fi
	log "started Warren $COMMIT pid $WARREN_PID"
}
cleanup() {
	if [[ -n $STARTED_WARREN ]]; then kill "$STARTED_WARREN" 2>/dev/null; fi
	if [[ -n $STARTED_BASE ]]; then kill "$STARTED_BASE" 2>/dev/null; fi
	rm -rf "$SRC" "${SRC_BASE:-}" "${DATADIRS[@]}"
}
trap cleanup EXIT
if [[ -z ${WARREN_PID:-} ]]; then
	start_warren
fi

# Scenarios: name|description|warren-perf arguments.
Q="--queue-prefix bench"
H=$((DUR / 2 > 1 ? DUR / 2 : 1))
SCENARIOS=(
	"s1|1P/1C max throughput, 16 B transient, auto-ack, at most 2,000 msgs in flight|--producers 1 --consumers 1 --size 16 --auto-ack --max-inflight 2000 --duration ${DUR}s"
	"s2|1P/1C 1 KB persistent, durable queue, confirm 200, prefetch 200, multi-ack 50|--producers 1 --consumers 1 --size 1024 --persistent --durable-queues --confirm 200 --prefetch 200 --multi-ack-every 50 --duration ${DUR}s"
	"s3|2P fill ${H} s with no consumer, then 1C drains (recv/s = drain rate)|--producers 2 --consumers 1 --size 1024 --auto-ack --duration ${H}s --consumer-delay ${H}s --drain-timeout 60s"
	"s4a|fixed rate 1k msg/s, 1 KB, 1P/1C auto-ack (latency)|--producers 1 --consumers 1 --size 1024 --auto-ack --rate 1000 --duration ${H}s"
	"s4b|fixed rate 5k msg/s (latency)|--producers 1 --consumers 1 --size 1024 --auto-ack --rate 5000 --duration ${H}s"
	"s4c|fixed rate 10k msg/s (latency)|--producers 1 --consumers 1 --size 1024 --auto-ack --rate 10000 --duration ${H}s"
	"s5|fanout to 10 queues, 1P, 2C, 1 KB auto-ack, at most 500 msgs (5,000 deliveries) in flight (recv/s = deliveries/s)|--exchange-type fanout --fanout-queues 10 --producers 1 --consumers 2 --size 1024 --auto-ack --max-inflight 500 --duration ${DUR}s"
	"s6|1,000 queues at 10 msg/s each: 10P x 100 queues at 1k msg/s, 10C, auto-ack|--queues 1000 --producers 10 --consumers 10 --rate 1000 --size 1024 --auto-ack --duration ${DUR}s"
	"s7|topic, 10,000 wildcard bindings over 10 queues, 2P, 2C, auto-ack, at most 2,000 in flight (recv/s = routed deliveries/s)|--exchange-type topic --topic-bindings 10000 --queues 10 --producers 2 --consumers 2 --size 1024 --auto-ack --max-inflight 2000 --duration ${DUR}s"
	"s8|${CONNS} idle connections (one channel each): broker RSS delta per connection|--connections-only ${CONNS} --duration $((H + 2))s"
)
# Stream queues over AMQP 0-9-1 (issue 13 section 4), run only when named
# ("st" names them all). Every run is bounded by --duration and --count.
ST="--queue-type stream --size 1024 --persistent"
[[ ${LEAN:-1} == 1 ]] && ST="$ST --lean-consumer --lean-publisher"
STREAM_SCENARIOS=(
	"st1|stream, 1P publish with confirms (window 200), 1 KB, no consumer (conf/s = confirmed/s)|$ST --producers 1 --consumers 0 --confirm 200 --count $STREAM_N --duration ${DUR}s"
	"st4|stream, 4P publish with confirms (window 200 each), 1 KB, no consumer|$ST --producers 4 --consumers 0 --confirm 200 --count $STREAM_N --duration ${DUR}s"
	"str|stream replay: 4P fill $STREAM_N msgs with confirms, then 1C from first, prefetch 1000, multi-ack 100 (recv/s = replay rate)|$ST --producers 4 --confirm 200 --count $((STREAM_N / 4)) --duration 120s --consumers 1 --consumers-after-publish --stream-offset first --prefetch 1000 --multi-ack-every 100 --drain-timeout 120s"
	"ste|stream end to end: 1P confirms (window 200), 1C from next, prefetch 1000, multi-ack 100|$ST --producers 1 --confirm 200 --count $STREAM_N --duration ${DUR}s --consumers 1 --prefetch 1000 --multi-ack-every 100 --drain-timeout 30s"
)
# Partitioned streams and consumer groups (issue 13 section 4), run only
# when named ("groups" names them all; no prefix matching). A fourth field
# is RabbitMQ's arguments where they differ ("-": Warren only). RabbitMQ
# 3.10 has no consumer groups over AMQP 0-9-1 and refuses
# x-single-active-consumer on streams: its nearest equivalent of a group
# of M members on P partitions is P streams, each read by one consumer of
# each group (--static-groups: member m reads the streams q with
# q % M == m), fed round robin as Warren's partitions are.
SG="$ST --producers 1 --confirm 200 --count $STREAM_N --duration ${DUR}s --prefetch 1000 --multi-ack-every 100 --drain-timeout 30s --groups 3 --members 2"
SMEM="$ST --producers 4 --confirm 200 --count $((STREAM_BIG / 4)) --duration 600s --consumers-after-publish --stream-offset first --prefetch 1000 --multi-ack-every 100 --consume-for 30s"
S100="$ST --producers 1 --confirm 200 --rate 1000 --duration ${DUR}s --prefetch 1000 --multi-ack-every 100 --drain-timeout 30s --members 1"
GROUP_SCENARIOS=(
	"sg|stream end to end with consumer groups: 1P confirms (window 200), 6 partitions, 3 groups x 2 members, prefetch 1000, multi-ack 100 (recv/s = deliveries/s over the 3 groups; RabbitMQ: 6 streams, 6 consumers)|$SG --partitions 6|$SG --queues 6 --static-groups"
	"smem|broker RSS: 4P fill $STREAM_BIG msgs with confirms, then 3 groups (RabbitMQ: 3 plain consumers) read from first for 30 s, far behind the tail|$SMEM --groups 3|$SMEM --consumers 3"
	"s100|100 groups of 1 at the tail of one stream, 1P at 1,000 msg/s (100,000 deliveries/s): broker CPU per delivery (against s100.1)|$S100 --groups 100|-"
	"s100.1|1 group at the tail of one stream, 1P at 1,000 msg/s: broker CPU per delivery, s100's baseline|$S100 --groups 1|-"
	"s100.0|no consumer, 1P at 1,000 msg/s: the publishing CPU that s100's and s100.1's include (CPU per delivery of G groups = (CPU µs/msg - s100.0's) / G)|$S100 --consumers 0|-"
)

# Quorum queues, single node (issue 14), run only when named ("qq" names
# them all).
QQ="--queue-type quorum --size 1024 --persistent"
[[ ${LEAN:-1} == 1 ]] && QQ="$QQ --lean-consumer --lean-publisher"
QUORUM_SCENARIOS=(
	"qq1|quorum, 1P publish with confirms (window 200), 1 KB persistent, no consumer (conf/s = confirmed/s)|$QQ --producers 1 --consumers 0 --confirm 200 --duration ${DUR}s"
	"qqe|quorum end to end: 1P confirms (window 200), 1C prefetch 1000, multi-ack 100|$QQ --producers 1 --confirm 200 --consumers 1 --prefetch 1000 --multi-ack-every 100 --duration ${DUR}s --drain-timeout 30s"
)
if [[ $# -gt 0 ]]; then
	want=" $* "
	sel=()
	for s in "${SCENARIOS[@]}" "${STREAM_SCENARIOS[@]}" "${QUORUM_SCENARIOS[@]}"; do
		n=${s%%|*}
		[[ $want == *" $n "* || $want == *" ${n:0:2} "* ]] && sel+=("$s")
	done
	for s in "${GROUP_SCENARIOS[@]}"; do
		n=${s%%|*}
		[[ $want == *" $n "* || $want == *" groups "* ]] && sel+=("$s")
	done
	SCENARIOS=("${sel[@]}")
fi

run_one() { # name broker round args...
	local name=$1 broker=$2 round=$3
	shift 3
	local url pid
	if [[ $broker == warren ]]; then
		if [[ -n $STARTED_WARREN && $FRESH_WARREN == 1 ]] && kill -0 "$WARREN_PID" 2>/dev/null; then
			# A fresh process per run, so that peak RSS (and s8's RSS
			# per connection) does not inherit the Go heap of earlier runs.
			kill "$WARREN_PID"
			wait "$WARREN_PID" 2>/dev/null
			start_warren
		fi
		if ! kill -0 "$WARREN_PID" 2>/dev/null; then
			log "WARREN DIED (pid $WARREN_PID) before $name round $round; see $OUT/warren.log"
			echo "$name round $round: warren was not running" >>"$OUT/warren-deaths.txt"
			start_warren
		fi
		url=$WARREN_URL pid=$WARREN_PID
	elif [[ -n $BASE_REV ]]; then
		start_base
		url=$RABBIT_URL pid=$RABBIT_PID
	else
		# Other users of the machine may restart RabbitMQ: follow its pid.
		if [[ $RABBIT_PID_AUTO == 1 ]] && ! grep -q beam /proc/"$RABBIT_PID"/cmdline 2>/dev/null; then
			local np
			np=$(pgrep -f beam.smp | head -1)
			log "RabbitMQ pid changed: ${RABBIT_PID} -> ${np:-none}"
			echo "$name round $round: RabbitMQ pid ${RABBIT_PID} -> ${np:-none}" >>"$OUT/retries.txt"
			RABBIT_PID=${np:-$RABBIT_PID}
		fi
		url=$RABBIT_URL pid=$RABBIT_PID
	fi
	local f=$OUT/$name.$broker.$round.json tmo=$RUN_TIMEOUT
	[[ $name == smem && $tmo -lt 900 ]] && tmo=900
	rm -f "$f"
	# Hard bound on the whole run: load + drain + setup/teardown margin.
	local rc try
	for try in 1 2 3; do
		timeout -k 5 "$tmo" "$PERF" --url "$url" --broker-pid "$pid" --quiet --json "$f" $Q "$@" >/dev/null 2>"$OUT/$name.$broker.$round.err"
		rc=$?
		# The shared RabbitMQ is sometimes restarted (stop_app/start_app)
		# by other users of the machine: retry a run that could not connect.
		if [[ -s $f ]] || ! grep -q 'connection refused' "$OUT/$name.$broker.$round.err"; then
			break
		fi
		log "$broker refused connections ($name round $round, try $try); retrying in 10 s"
		echo "$name $broker round $round try $try: connection refused" >>"$OUT/retries.txt"
		sleep 10
	done
	if [[ ! -s $f ]]; then
		jq -n --arg e "no summary (exit $rc): $(tail -c 300 "$OUT/$name.$broker.$round.err")" '{errors:[$e]}' >"$f"
	fi
	jq -c --arg b "$broker" '{broker:$b, sent, confirmed, received, lost, send_rate, confirm_rate, receive_rate, p99:.latency_ms.p99, cpu:.broker_cpu_seconds, rss_kb:.broker_rss_kb, kb_per_connection, errors:(.errors|length), groups:((.groups // []) | map({name, received, duplicates, lost, order_violations}) | if length > 3 then .[:3] + ["..."] else . end)}' "$f" >&2
	sleep 2
}

[[ -n $BASE_REV ]] && log "second broker: Warren built from $BASE_REV on port $BASE_PORT"
log "results in $OUT; rounds $ROUNDS; duration ${DUR}s; Warren $WARREN_URL pid $WARREN_PID; RabbitMQ $RABBIT_URL pid $RABBIT_PID"
for s in "${SCENARIOS[@]}"; do
	IFS='|' read -r name desc args bargs <<<"$s"
	bargs=${bargs:-$args}
	# Against a base build both run Warren's arguments (sg's and smem's
	# RabbitMQ stand-ins, s100's Warren-only runs).
	[[ -n $BASE_REV ]] && bargs=$args
	log "$name: $desc"
	for ((r = 1; r <= ROUNDS; r++)); do
		# shellcheck disable=SC2086
		run_one "$name" warren "$r" $args
		if [[ $bargs != - ]]; then
			# shellcheck disable=SC2086
			run_one "$name" rabbitmq "$r" $bargs
		fi
	done
done

# Table of medians.
table() {
	echo "| scenario | broker | sent/s | conf/s | recv/s | p50 ms | p99 ms | p99.9 ms | broker CPU µs/msg | CPU µs/delivery | broker CPU % | client CPU % | broker peak RSS MB | KB/conn | lost | errors |"
	echo "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
	for s in "${SCENARIOS[@]}"; do
		IFS='|' read -r name desc args bargs <<<"$s"
		jq -s -r --arg name "$name" --arg la "$LABEL_A" --arg lb "$LABEL_B" --arg ratio "$RATIO" '
		def med: map(select(. != null)) | sort | if length == 0 then null elif length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
		def fig(b): map(select(.broker_tag == b)) | {
			sent: (map(.send_rate) | med),
			conf: (map(.confirm_rate) | med),
			recv: (map(.receive_rate) | med),
			p50: (map(.latency_ms.p50) | med),
			p99: (map(.latency_ms.p99) | med),
			p999: (map(.latency_ms.p99_9) | med),
			n: length,
			cpumsg: (map(if .broker_cpu_seconds != null and ((.sent // 0) > 0) then .broker_cpu_seconds * 1e6 / .sent else null end) | med),
			cpudlv: (map(if .broker_cpu_seconds != null and ((.received // 0) > 0) then .broker_cpu_seconds * 1e6 / .received else null end) | med),
			cpupct: (map(if .broker_cpu_seconds != null and (.elapsed_s // 0) > 0 then 100 * .broker_cpu_seconds / .elapsed_s else null end) | med),
			clipct: (map(if (.elapsed_s // 0) > 0 then 100 * .client_cpu_seconds / .elapsed_s else null end) | med),
			rss: (map(if .broker_rss_kb != null then .broker_rss_kb / 1024 else null end) | med),
			kbc: (map(.kb_per_connection) | med),
			lost: (map(.lost // 0) | add),
			dup: (map(.duplicates // 0) | add),
			ooo: (map((.out_of_order // 0) + (.stream_offset_regressions // 0) + (.stream_offset_missing // 0)) | add),
			errs: (map(.errors // [] | length) | add),
			undrained: (map(select(.drain_timed_out == true)) | length)
		};
		def f(x; d): if x == null then "–" else (x * pow(10; d) | round / pow(10; d) | tostring) end;
		def ratio(a; b): if a == null or b == null or b == 0 then "–" else ((a / b) * 100 | round / 100 | tostring) + "×" end;
		(fig("warren")) as $w | (fig("rabbitmq")) as $r |
		def row(n; x): "| \($name) | \(n) | \(f(x.sent;0)) | \(f(x.conf;0)) | \(f(x.recv;0)) | \(f(x.p50;2)) | \(f(x.p99;2)) | \(f(x.p999;2)) | \(f(x.cpumsg;1)) | \(f(x.cpudlv;2)) | \(f(x.cpupct;0)) | \(f(x.clipct;0)) | \(f(x.rss;0)) | \(f(x.kbc;1)) | \(x.lost)\(if x.undrained > 0 then " (drain timed out in \(x.undrained) runs)" else "" end)\(if x.dup > 0 or x.ooo > 0 then " (dup \(x.dup), out of order \(x.ooo))" else "" end) | \(x.errs) |";
		row($la; $w),
		if $r.n == 0 then empty else
		row($lb; $r),
		"| \($name) | **\($ratio)** | \(ratio($w.sent;$r.sent)) | \(ratio($w.conf;$r.conf)) | \(ratio($w.recv;$r.recv)) | \(ratio($w.p50;$r.p50)) | \(ratio($w.p99;$r.p99)) | \(ratio($w.p999;$r.p999)) | \(ratio($w.cpumsg;$r.cpumsg)) | \(ratio($w.cpudlv;$r.cpudlv)) | \(ratio($w.cpupct;$r.cpupct)) | | \(ratio($w.rss;$r.rss)) | \(ratio($w.kbc;$r.kbc)) | | |" end
		' <(for f in "$OUT/$name".*.json; do b=${f#"$OUT/$name".}; b=${b%%.*}; jq -c --arg b "$b" '. + {broker_tag:$b}' "$f"; done)
	done
	echo
	echo "Scenarios:"
	echo
	for s in "${SCENARIOS[@]}"; do
		IFS='|' read -r name desc args bargs <<<"$s"
		[[ -n $BASE_REV ]] && bargs=
		case ${bargs:-} in
		"") echo "- **$name** — $desc: \`warren-perf $args\`" ;;
		-) echo "- **$name** — $desc (Warren only): \`warren-perf $args\`" ;;
		*) echo "- **$name** — $desc: Warren \`warren-perf $args\`; RabbitMQ \`warren-perf $bargs\`" ;;
		esac
	done
	if [[ -s $OUT/retries.txt ]]; then
		echo
		echo "Incidents (RabbitMQ restarted by others, retries after connection refused): $(paste -sd';' "$OUT/retries.txt")"
	fi
	if [[ -s $OUT/warren-deaths.txt ]]; then
		echo
		echo "Warren was found dead (and restarted) before: $(paste -sd';' "$OUT/warren-deaths.txt")"
	fi
}

TABLE=$(table)
HEADER="Run $(date -u '+%Y-%m-%d %H:%M UTC'), commit $COMMIT, $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, load average at end: $(cut -d' ' -f1-3 /proc/loadavg); rounds $ROUNDS, ${DUR}s per scenario; medians over rounds (lost/errors: sums)."
printf '%s\n\n%s\n' "$HEADER" "$TABLE" | tee "$OUT/table.md"

if [[ ${UPDATE_MD:-0} == 1 ]]; then
	MD=$ROOT/BENCHMARKS.md
	# A run of stream scenarios only has its own section.
	MARK=results
	only_streams=1 only_groups=1
	for s in "${SCENARIOS[@]}"; do
		[[ $s == st* ]] || only_streams=0
		[[ $s == sg\|* || $s == smem\|* || $s == s100* ]] || only_groups=0
	done
	[[ $only_streams == 1 ]] && MARK=stream-results
	[[ $only_groups == 1 ]] && MARK=group-results
	if [[ -f $MD ]] && grep -q "<!-- $MARK:begin -->" "$MD"; then
		awk -v tf="$OUT/table.md" -v b="<!-- $MARK:begin -->" -v e="<!-- $MARK:end -->" '
			$0 == b { print; while ((getline l < tf) > 0) print l; skip = 1; next }
			$0 == e { skip = 0 }
			!skip' "$MD" >"$MD.tmp" && mv "$MD.tmp" "$MD"
	else
		{ echo "<!-- $MARK:begin -->"; cat "$OUT/table.md"; echo "<!-- $MARK:end -->"; } >>"$MD"
	fi
	log "updated $MD"
fi
exit
}
