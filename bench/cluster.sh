#!/usr/bin/env bash
# cluster.sh: a 3-node RabbitMQ 3.10 cluster against a 3-node Warren
# cluster on this machine (issue 14, section 3). For each: 1 KB persistent
# messages with confirms into a queue declared on node 1, the publisher
# on node 1 and the consumer on node 2 (cmd/warren-perf with
# --consumer-url), reporting the confirmed rate and the p99 confirm
# latency; then the failover time: a publisher on node 2 (then node 3)
# publishes with confirms to a fresh queue led by node 1, node 1 gets
# kill -9, and the longest time without a confirm is measured
# (bench/failover).
#
# Runs: RabbitMQ quorum; Warren classic (durable, persistent: its home is
# node 1, so its "failover" is node 1's restart: it has no replica);
# Warren quorum (three members; if a cluster refuses the declare, as
# before issue 14's quorum queues, the script says so and skips it).
#
# Usage: bench/cluster.sh [rabbit] [warren]     (default: both)
# Environment:
#   DUR=10          seconds of load per throughput run
#   ROUNDS=3        throughput runs per broker and queue type (median kept)
#   CONFIRM=64      outstanding confirms per publisher
#   LEAN=1          warren-perf's lean clients (--lean-publisher
#                   --lean-consumer, Warren's codec) on both brokers; 0:
#                   amqp091-go's
#   FAILOVER_DUR=20 seconds the failover publisher runs (the kill at 5 s)
#   STOP_SIGNAL=KILL the signal node 1 gets in a failover: KILL (a crash),
#                   or TERM (a clean stop, as in a rolling restart; the
#                   script waits for the process to exit)
#   RABBIT_PORT=5701  AMQP ports RABBIT_PORT..+2 (dist ports +20000)
#   WARREN_PORT=5711  AMQP ports WARREN_PORT..+2 (cluster ports +20000);
#                   the nodes' management API ports are WARREN_PORT+10000
#                   .. WARREN_PORT+10002 (127.0.0.1, --mgmt-listen; the
#                   leader look-up asks node 2's, WARREN_PORT+10001)
#   RABBIT_BIN=/usr/lib/rabbitmq/bin  where rabbitmq-server and rabbitmqctl are
#   OUT=dir         logs, data and JSON (default: a temp dir, removed)
#   WARREN_BIN=path a warren binary to run instead of the checkout's
#   QUORUM_ONLY=1   Warren: only the quorum throughput run (no classic
#                   run, no failovers)
#   FAILOVER_ONLY=1 only the quorum failovers (no throughput runs, no
#                   classic failover)
#   FAILOVERS=1     quorum failovers per broker (node 1 restarted between
#                   them; the median is kept)
#   IDLE=N          instead of all that: N quorum queues declared on node
#                   1 (the declare time per queue), then each node's CPU
#                   (% of a core) and RSS at rest, 10 s after the last
#                   declare, over IDLE_DUR=20 seconds
#   RESTART_ALL=1   instead of all that: a whole cluster's restart. A
#                   publisher with confirms, over all three nodes in
#                   turn, to a quorum queue declared on node 1; after 5 s
#                   every node gets kill -9, and all three start again
#                   DOWN=2 seconds later (at once, in parallel); reports
#                   the seconds from that start until the nodes accept
#                   AMQP and until the queue confirms again
#                   (RESTART_DUR=60 seconds of publishing in all)
#   PPROF_PORT=p    Warren nodes serve Go profiles on 127.0.0.1:p..p+2
#   IOSTALL=1       each throughput round also runs bench/iostall (one
#                   writer, a sync each ms, for 3 s from 3 s in): the
#                   disk's stalls under that broker's load, logged with
#                   the round; and warren-perf writes each round's
#                   confirms to OUT/LABEL-ROUND.trace (--confirm-trace)
# It never touches the RabbitMQ on 5672: its nodes have their own names
# (wbench1..3@host), ports, data and log dirs, plugins file and erlang
# cookie (HOME is a directory of its own while it runs rabbitmqctl).
{
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-10}
ROUNDS=${ROUNDS:-3}
CONFIRM=${CONFIRM:-64}
LEAN_ARGS=
[[ ${LEAN:-1} == 1 ]] && LEAN_ARGS="--lean-publisher --lean-consumer"
FAILOVER_DUR=${FAILOVER_DUR:-20}
STOP_SIGNAL=${STOP_SIGNAL:-KILL}
QUORUM_ONLY=${QUORUM_ONLY:-0}
FAILOVER_ONLY=${FAILOVER_ONLY:-0}
FAILOVERS=${FAILOVERS:-1}
PPROF_PORT=${PPROF_PORT:-}
IDLE=${IDLE:-0}
IDLE_DUR=${IDLE_DUR:-20}
RESTART_ALL=${RESTART_ALL:-0}
DOWN=${DOWN:-2}
RESTART_DUR=${RESTART_DUR:-60}
RABBIT_PORT=${RABBIT_PORT:-5701}
WARREN_PORT=${WARREN_PORT:-5711}
# The scripts themselves, not /usr/sbin's wrappers (which switch to the
# rabbitmq user and lose this environment).
RABBIT_BIN=${RABBIT_BIN:-/usr/lib/rabbitmq/bin}
KEEP_OUT=1
if [[ -z ${OUT:-} ]]; then OUT=$(mktemp -d /tmp/warren-cluster-bench.XXXXXX); KEEP_OUT=0; fi
mkdir -p "$OUT"
WHICH=("$@")
[[ ${#WHICH[@]} == 0 ]] && WHICH=(rabbit warren)
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
HOST=$(hostname -s)

BIN=$OUT/bin
mkdir -p "$BIN"
log "building warren, warren-perf, failover into $BIN"
(cd "$ROOT" && go build -o "$BIN/warren" ./cmd/warren && go build -o "$BIN/warren-perf" ./cmd/warren-perf &&
	go build -o "$BIN/failover" ./bench/failover && go build -o "$BIN/iostall" ./bench/iostall) || { log "build failed"; exit 1; }
[[ -n ${WARREN_BIN:-} ]] && cp "$WARREN_BIN" "$BIN/warren"

PIDS=() # every OS process this script started (beam.smp pids too)
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [[ $KEEP_OUT == 0 ]]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
# stop_all: the nodes started so far go, and what they wrote reaches the
# disk, before the next broker runs: each is measured with the machine to
# itself (an idle Erlang VM still spins its schedulers, and a broker's
# dirty pages written back during the next one's rounds cost its syncs).
stop_all() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	PIDS=()
	sync
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# perf LABEL URL1 URL2 QUEUE_TYPE: ROUNDS throughput runs; prints
# "conf/s p99_confirm_ms p99_e2e_ms lost".
perf() {
	local label=$1 u1=$2 u2=$3 qt=$4 r
	for ((r = 1; r <= ROUNDS; r++)); do
		# Declared on node 1 first, and known on node 2 before the
		# consumer starts there (a cluster applies a declare on each node
		# in its own time).
		"$BIN/failover" --declare-url "$u1" --urls "$u1,$u2" --queue "cb-$label-$r-0" --queue-type "$qt" --declare-only \
			2>"$OUT/$label-$r.declare.err" || log "$label round $r: $(tail -1 "$OUT/$label-$r.declare.err")"
		local trace=() stall=
		if [[ ${IOSTALL:-0} == 1 ]]; then
			trace=(--confirm-trace "$OUT/$label-$r.trace")
			(sleep 3 && "$BIN/iostall" -writers 1 -pace 1ms -duration 3s -dir "$OUT" >"$OUT/$label-$r.iostall" 2>&1) &
			stall=$!
		fi
		"$BIN/warren-perf" --url "$u1" --consumer-url "$u2" --queue-prefix "cb-$label-$r" --queue-type "$qt" --predeclared \
			--size 1024 --persistent --confirm "$CONFIRM" --producers 1 --consumers 1 --prefetch 200 $LEAN_ARGS \
			--multi-ack-every 50 --duration "${DUR}s" --drain-timeout 30s --quiet --json "$OUT/$label-$r.json" "${trace[@]}" >/dev/null 2>"$OUT/$label-$r.err" ||
			log "$label round $r: warren-perf failed: $(tail -1 "$OUT/$label-$r.err")"
		if [[ -n $stall ]]; then
			wait "$stall"
			log "$label round $r iostall: $(head -1 "$OUT/$label-$r.iostall"); $(tail -1 "$OUT/$label-$r.iostall")"
		fi
		[[ -s $OUT/$label-$r.json ]] && log "$label round $r: $(jq -c '{confirm_rate, p99c: .confirm_latency_ms.p99, p99: .latency_ms.p99, lost, errors}' "$OUT/$label-$r.json")"
	done
	local rate p99c p99 lost
	rate=$(cat "$OUT/$label"-[0-9]*.json 2>/dev/null | jq -r '.confirm_rate' | median)
	p99c=$(cat "$OUT/$label"-[0-9]*.json 2>/dev/null | jq -r '.confirm_latency_ms.p99' | median)
	p99=$(cat "$OUT/$label"-[0-9]*.json 2>/dev/null | jq -r '.latency_ms.p99' | median)
	lost=$(cat "$OUT/$label"-[0-9]*.json 2>/dev/null | jq -r '.lost // 0' | awk '{s+=$1} END {print s+0}')
	echo "$rate $p99c $p99 $lost"
}

# failover LABEL DECLARE_URL URLS QUEUE_TYPE KILL_FN [RESTART_FN]: runs
# bench/failover on URLS with its queue declared on DECLARE_URL, calls KILL_FN after 5 s (then RESTART_FN), prints the longest
# confirm gap in ms.
failover() {
	local label=$1 durl=$2 urls=$3 qt=$4 killfn=$5 restartfn=${6:-} fp
	"$BIN/failover" --declare-url "$durl" --urls "$urls" --queue "cb-failover-$label" --queue-type "$qt" --duration "${FAILOVER_DUR}s" \
		>"$OUT/$label-failover.json" 2>"$OUT/$label-failover.err" &
	fp=$!
	sleep 5
	[[ -n ${LEADER_FN:-} ]] && log "$label: $($LEADER_FN "cb-failover-$label")"
	log "$label: SIG$STOP_SIGNAL to node 1"
	$killfn
	[[ -n $restartfn ]] && $restartfn
	wait $fp || log "$label failover: $(tail -1 "$OUT/$label-failover.err")"
	log "$label failover: $(jq -c '{confirmed, nacked, unknown, longest_gap_ms, resumed}' "$OUT/$label-failover.json" 2>/dev/null)"
	FO=$(jq -r 'if .resumed then .longest_gap_ms else "no confirms for \(.longest_gap_ms) ms, to the end" end' "$OUT/$label-failover.json" 2>/dev/null || echo -)
}

# wait_ports PORT: until 127.0.0.1 accepts connections on PORT..PORT+2
# (2 minutes at most each).
wait_ports() {
	local i t
	for i in 0 1 2; do
		for ((t = 0; t < 1200; t++)); do
			(exec 3<>"/dev/tcp/127.0.0.1/$(($1 + i))") 2>/dev/null && break
			sleep 0.1
		done
	done
}

# restart_all LABEL DECLARE_URL URLS KILL_FN START_FN WAIT_FN: the whole
# cluster's restart (RESTART_ALL); sets RA to "serving_s confirming_s",
# seconds from the restart: until every node accepts AMQP (WAIT_FN
# returns), until the first confirm after it. Not in a subshell: the
# nodes it starts join PIDS.
restart_all() {
	local label=$1 durl=$2 urls=$3 killfn=$4 startfn=$5 waitfn=$6 fp t0 t1 to
	"$BIN/failover" --declare-url "$durl" --urls "$urls" --queue "cb-restart-$label" --queue-type quorum --duration "${RESTART_DUR}s" \
		>"$OUT/$label-restart.json" 2>"$OUT/$label-restart.err" &
	fp=$!
	sleep 5
	log "$label: kill -9 to every node"
	$killfn
	sleep "$DOWN"
	t0=$(date +%s.%N)
	log "$label: starting every node"
	$startfn
	$waitfn
	t1=$(date +%s.%N)
	log "$label: every node accepts AMQP $(echo "$t1 - $t0" | bc) s after the restart"
	wait $fp || log "$label restart: $(tail -1 "$OUT/$label-restart.err")"
	log "$label restart: $(jq -c '{confirmed, nacked, unknown, longest_gap_ms, gap_to, resumed}' "$OUT/$label-restart.json" 2>/dev/null)"
	to=$(jq -r 'if .resumed then .gap_to else "" end' "$OUT/$label-restart.json" 2>/dev/null)
	RA="$(printf '%.1f' "$(echo "$t1 - $t0" | bc)") -"
	[[ -n $to ]] && RA=$(printf '%.1f %.1f' "$(echo "$t1 - $t0" | bc)" "$(echo "$(date -d "$to" +%s.%N) - $t0" | bc)")
}

# idle LABEL URL PID1 PID2 PID3: declares IDLE quorum queues through URL
# (one connection, one channel), waits 10 s, then samples the three
# processes' CPU time over IDLE_DUR seconds; prints "declare_ms_each
# cpu_pct_per_node rss_mb_per_node" (means of the three nodes).
idle() {
	local label=$1 url=$2; shift 2
	local took
	took=$(/usr/bin/python3 - "$url" "$IDLE" <<'PY' 2>"$OUT/$label-idle.err"
import sys, time, pika
params = pika.URLParameters(sys.argv[1])
params.blocked_connection_timeout = 600
conn = pika.BlockingConnection(params)
ch = conn.channel()
n = int(sys.argv[2])
t = time.monotonic()
for i in range(n):
    ch.queue_declare(queue="idle-%d" % i, durable=True, arguments={"x-queue-type": "quorum"})
print("%.1f" % ((time.monotonic() - t) * 1000 / n))
conn.close()
PY
	) || { log "$label: declares failed: $(tail -1 "$OUT/$label-idle.err")"; echo "- - -"; return; }
	log "$label: $IDLE quorum queues declared, $took ms each"
	sleep 10
	local p ticks0=0 ticks1=0 rss=0 hz
	hz=$(getconf CLK_TCK)
	for p in "$@"; do ticks0=$((ticks0 + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	sleep "$IDLE_DUR"
	for p in "$@"; do
		ticks1=$((ticks1 + $(awk '{print $14 + $15}' "/proc/$p/stat")))
		rss=$((rss + $(awk '/^VmRSS/ {print $2}' "/proc/$p/status")))
	done
	local cpu
	cpu=$(awk -v d=$((ticks1 - ticks0)) -v hz="$hz" -v s="$IDLE_DUR" -v n=$# 'BEGIN {printf "%.1f", d / hz / s / n * 100}')
	log "$label: at rest, $cpu% of a core and $((rss / 1024 / $#)) MB RSS per node"
	echo "$took $cpu $((rss / 1024 / $#))"
}

# --- RabbitMQ: three nodes wbench1..3@$HOST ---
RHOME=$OUT/rabbit-home
rabbit_env() {
	local i=$1
	echo HOME="$RHOME" RABBITMQ_NODENAME="wbench$i@$HOST" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT=$((RABBIT_PORT + i - 1)) RABBITMQ_DIST_PORT=$((RABBIT_PORT + 20000 + i - 1)) \
		RABBITMQ_MNESIA_BASE="$OUT/rabbit$i/mnesia" RABBITMQ_LOG_BASE="$OUT/rabbit$i/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$RHOME/enabled_plugins" RABBITMQ_CONFIG_FILE="$RHOME/rabbitmq.conf" \
		RABBITMQ_CONF_ENV_FILE=/dev/null RABBITMQ_PID_FILE="$OUT/rabbit$i/pid"
}
rctl() { local i=$1; shift; env $(rabbit_env "$i") "$RABBIT_BIN/rabbitmqctl" -q -n "wbench$i@$HOST" "$@"; }
rabbit_start() {
	local i=$1
	mkdir -p "$OUT/rabbit$i"
	env $(rabbit_env "$i") "$RABBIT_BIN/rabbitmq-server" >"$OUT/rabbit$i/server.out" 2>&1 &
	rctl "$i" wait --timeout 120 "$OUT/rabbit$i/pid" >/dev/null || { log "RabbitMQ node $i did not start"; return 1; }
	PIDS+=("$(cat "$OUT/rabbit$i/pid")")
}
rabbit_leader() { echo "queue $1 led by $(rctl 2 list_queues name leader --formatter json | jq -r --arg q "$1" '.[] | select(.name == $q) | .leader')"; }
rabbit_kill1() {
	local p
	p=$(cat "$OUT/rabbit1/pid")
	kill -"$STOP_SIGNAL" "$p"
	while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
}
rabbit_killall() {
	local i p
	for i in 1 2 3; do kill -9 "$(cat "$OUT/rabbit$i/pid")" 2>/dev/null; done
	for i in 1 2 3; do
		p=$(cat "$OUT/rabbit$i/pid")
		while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
	done
}
# Each node waits for the others' tables at its start: all start at once.
rabbit_startall() {
	local i ps=()
	for i in 1 2 3; do
		rabbit_start "$i" &
		ps+=($!)
	done
	wait "${ps[@]}"
	for i in 1 2 3; do PIDS+=("$(cat "$OUT/rabbit$i/pid")"); done
}
rabbit_waitall() { wait_ports "$RABBIT_PORT"; }
rabbit_run() {
	if [[ ! -x $RABBIT_BIN/rabbitmq-server ]]; then
		log "no $RABBIT_BIN/rabbitmq-server: skipping RabbitMQ"
		return
	fi
	mkdir -p "$RHOME"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RHOME/.erlang.cookie"
	chmod 400 "$RHOME/.erlang.cookie"
	echo "[]." >"$RHOME/enabled_plugins"
	: >"$RHOME/rabbitmq.conf"
	for i in 1 2 3; do rabbit_start $i || return; done
	for i in 2 3; do
		rctl $i stop_app && rctl $i join_cluster "wbench1@$HOST" && rctl $i start_app || { log "join_cluster of node $i failed"; return; }
	done
	log "RabbitMQ cluster: $(rctl 1 cluster_status --formatter json | jq -c '.running_nodes')"
	log "RabbitMQ version: $(rctl 1 eval 'rabbit:product_version().' 2>/dev/null)"
	local u1=amqp://guest:guest@127.0.0.1:$RABBIT_PORT/ u2=amqp://guest:guest@127.0.0.1:$((RABBIT_PORT + 1))/ u3=amqp://guest:guest@127.0.0.1:$((RABBIT_PORT + 2))/
	if ((IDLE > 0)); then
		RESULT_RABBIT_IDLE=$(idle rabbit "$u1" "$(cat "$OUT/rabbit1/pid")" "$(cat "$OUT/rabbit2/pid")" "$(cat "$OUT/rabbit3/pid")")
		return
	fi
	if [[ $RESTART_ALL == 1 ]]; then
		restart_all rabbit "$u1" "$u1,$u2,$u3" rabbit_killall rabbit_startall rabbit_waitall
		RESULT_RABBIT_RA=$RA
		return
	fi
	[[ $FAILOVER_ONLY == 1 ]] || RESULT_RABBIT_QQ=$(perf rabbit-quorum "$u1" "$u2" quorum)
	local r fos=()
	for ((r = 1; r <= FAILOVERS; r++)); do
		((r > 1)) && { rabbit_start 1 || return; sleep 5; }
		LEADER_FN=rabbit_leader failover "rabbit-quorum-$r" "$u1" "$u2,$u3" quorum rabbit_kill1
		fos+=("$FO")
	done
	RESULT_RABBIT_FO=$(fo_median "${fos[@]}")
}

# fo_median FO...: the median of the failover times when each resumed,
# else the list.
fo_median() {
	local f
	for f in "$@"; do [[ $f =~ ^[0-9.]+$ ]] || { echo "$*"; return; }; done
	(($# == 1)) && { echo "$1"; return; }
	local med
	med=$(printf '%s\n' "$@" | median)
	local IFS=,
	printf '%.0f (%s)' "$med" "$*"
}

# --- Warren: three nodes w1..w3 ---
warren_start() {
	local i=$1
	mkdir -p "$OUT/warren$i"
	local extra=()
	[[ -n $PPROF_PORT ]] && extra=(--pprof-listen "127.0.0.1:$((PPROF_PORT + i - 1))")
	WARREN_CLUSTER_SECRET=cluster-bench-secret "$BIN/warren" --node-name "w$i" --listen "127.0.0.1:$((WARREN_PORT + i - 1))" \
		--mgmt-listen "127.0.0.1:$((WARREN_PORT + 10000 + i - 1))" --prometheus-listen off --data-dir "$OUT/warren$i/data" \
		--cluster-listen "127.0.0.1:$((WARREN_PORT + 20000 + i - 1))" --cluster-seeds "$WSEEDS" "${extra[@]}" >>"$OUT/warren$i/log" 2>&1 &
	WPID[$i]=$!
	PIDS+=("$!")
}
warren_wait() {
	local i=$1 t
	for ((t = 0; t < 600; t++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$((WARREN_PORT + i - 1))") 2>/dev/null && return 0
		sleep 0.2
	done
	log "Warren node $i did not start"
	return 1
}
# warren_leader QUEUE: its leader, as node 2's management API reports it.
warren_leader() { echo "queue $1 led by $(curl -s -u guest:guest "http://127.0.0.1:$((WARREN_PORT + 10001))/api/queues/%2F/$1" | jq -r .leader)"; }
warren_kill1() { kill -"$STOP_SIGNAL" "${WPID[1]}"; wait "${WPID[1]}" 2>/dev/null; }
# restart node 1 at once (kill -9 leaves nothing to wait for but the exit).
warren_restart1() { warren_start 1; }
warren_killall() {
	local i
	for i in 1 2 3; do kill -9 "${WPID[$i]}" 2>/dev/null; done
	for i in 1 2 3; do wait "${WPID[$i]}" 2>/dev/null; done
}
warren_startall() { for i in 1 2 3; do warren_start "$i"; done; }
warren_waitall() { wait_ports "$WARREN_PORT"; }
warren_run() {
	WSEEDS=127.0.0.1:$((WARREN_PORT + 20000)),127.0.0.1:$((WARREN_PORT + 20001)),127.0.0.1:$((WARREN_PORT + 20002))
	for i in 1 2 3; do warren_start $i; done
	for i in 1 2 3; do warren_wait $i || return; done
	sleep 2 # the nodes see each other running
	local u1=amqp://guest:guest@127.0.0.1:$WARREN_PORT/ u2=amqp://guest:guest@127.0.0.1:$((WARREN_PORT + 1))/ u3=amqp://guest:guest@127.0.0.1:$((WARREN_PORT + 2))/
	if ((IDLE > 0)); then
		RESULT_WARREN_IDLE=$(idle warren "$u1" "${WPID[1]}" "${WPID[2]}" "${WPID[3]}")
		return
	fi
	if [[ $RESTART_ALL == 1 ]]; then
		restart_all warren "$u1" "$u1,$u2,$u3" warren_killall warren_startall warren_waitall
		RESULT_WARREN_RA=$RA
		return
	fi
	if [[ $QUORUM_ONLY == 1 ]]; then
		RESULT_WARREN_QQ=$(perf warren-quorum "$u1" "$u2" quorum)
		return
	fi
	[[ $FAILOVER_ONLY == 1 ]] || RESULT_WARREN_CQ=$(perf warren-classic "$u1" "$u2" classic)
	if "$BIN/failover" --urls "$u1" --queue cb-probe --queue-type quorum --duration 1s >/dev/null 2>"$OUT/warren-probe.err"; then
		[[ $FAILOVER_ONLY == 1 ]] || RESULT_WARREN_QQ=$(perf warren-quorum "$u1" "$u2" quorum)
		local r fos=()
		for ((r = 1; r <= FAILOVERS; r++)); do
			LEADER_FN=warren_leader failover "warren-quorum-$r" "$u1" "$u2,$u3" quorum warren_kill1
			fos+=("$FO")
			warren_start 1
			warren_wait 1
			sleep 3 # node 1 catches up and its members see it running
		done
		RESULT_WARREN_QFO=$(fo_median "${fos[@]}")
	else
		WARREN_QQ_SKIP=$(tail -1 "$OUT/warren-probe.err" | grep -o 'Exception ([0-9]*) Reason: "[A-Z_]*' | sed 's/Reason: "//')
		log "Warren quorum skipped: $(tail -1 "$OUT/warren-probe.err")"
	fi
	[[ $FAILOVER_ONLY == 1 ]] && return
	failover warren-classic "$u1" "$u2,$u3" classic warren_kill1 warren_restart1
	RESULT_WARREN_CFO=$FO
}

RESULT_RABBIT_IDLE="- - -" RESULT_WARREN_IDLE="- - -" RESULT_RABBIT_RA="- -" RESULT_WARREN_RA="- -" RESULT_RABBIT_QQ="- - - -" RESULT_RABBIT_FO=- RESULT_WARREN_CQ="- - - -" RESULT_WARREN_QQ="- - - -" RESULT_WARREN_QFO=- RESULT_WARREN_CFO=- WARREN_QQ_SKIP=""
declare -a WPID
for w in "${WHICH[@]}"; do
	stop_all
	case $w in
	rabbit) rabbit_run ;;
	warren) warren_run ;;
	*) log "unknown: $w (rabbit, warren)"; exit 2 ;;
	esac
done

row() { # label "rate p99c p99 lost" failover
	read -r rate p99c p99 lost <<<"$2"
	num() { [[ $1 == - ]] && echo - || printf "%.${2}f" "$1"; }
	printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(num "$rate" 0)" "$(num "$p99c" 1)" "$(num "$p99" 1)" "$lost" "$3"
}
if ((IDLE > 0)); then
	{
		echo "3-node clusters on $(hostname -s), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d): $IDLE quorum queues declared on node 1 (one channel), then ${IDLE_DUR}s at rest"
		echo
		echo "| broker | declare ms per queue | CPU at rest, % of a core per node | RSS MB per node |"
		echo "|---|--:|--:|--:|"
		read -r a b c <<<"$RESULT_RABBIT_IDLE"
		echo "| RabbitMQ 3.10 | $a | $b | $c |"
		read -r a b c <<<"$RESULT_WARREN_IDLE"
		echo "| Warren | $a | $b | $c |"
	} | tee "$OUT/cluster.md"
	exit 0
fi
if [[ $RESTART_ALL == 1 ]]; then
	{
		echo "3-node clusters on $(hostname -s), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d): a publisher with confirms to a quorum queue over all three nodes; kill -9 to every node, all started again ${DOWN}s later"
		echo
		echo "| broker | every node accepts AMQP, s after the start | the queue confirms again, s after the start |"
		echo "|---|--:|--:|"
		read -r a b <<<"$RESULT_RABBIT_RA"
		echo "| RabbitMQ 3.10 | $a | $b |"
		read -r a b <<<"$RESULT_WARREN_RA"
		echo "| Warren | $a | $b |"
	} | tee "$OUT/cluster.md"
	exit 0
fi
{
	echo "3-node clusters on $(hostname -s), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%d): 1 KB persistent, confirms (window $CONFIRM), publisher on node 1, consumer on node 2, ${DUR}s x $ROUNDS rounds (medians); failover: SIG$STOP_SIGNAL to node 1 (the queue's leader or home) under a publisher on node 2"
	echo
	echo "| broker, queue | confirmed/s | p99 confirm ms | p99 end-to-end ms | lost | failover ms |"
	echo "|---|--:|--:|--:|--:|--:|"
	row "RabbitMQ 3.10, quorum" "$RESULT_RABBIT_QQ" "$RESULT_RABBIT_FO"
	row "Warren, quorum" "$RESULT_WARREN_QQ" "$RESULT_WARREN_QFO${WARREN_QQ_SKIP:+ (skipped: $WARREN_QQ_SKIP)}"
	row "Warren, classic (no replica: failover = node 1's restart)" "$RESULT_WARREN_CQ" "$RESULT_WARREN_CFO"
} | tee "$OUT/cluster.md"
}
