#!/usr/bin/env bash
# clusterconf.sh: the cluster conformance suite (conformance/clusterconf,
# build tag clusterconf) against a 3-node RabbitMQ 3.10 cluster, then the
# same cases against a 3-node Warren cluster. RabbitMQ's run records its
# replies (OUT/rabbitmq.json); Warren's run is compared with that record.
# Kill and restart of a node are part of the cases: the suite calls this
# script back (`clusterconf.sh ctl kill|start N`, with CC_OUT and CC_TARGET
# set) to kill -9 a node (RabbitMQ: its beam.smp pid) and start it again,
# and (`clusterconf.sh ctl delete_member N QUEUE`) to remove node N's
# replica of a quorum queue.
#
# Usage: bench/clusterconf.sh [rabbit] [warren]     (default: both)
# Environment:
#   RABBIT_PORT=5721   AMQP ports RABBIT_PORT..+2, dist ports +20000,
#                      management ports +10000
#   WARREN_PORT=24731  AMQP ports WARREN_PORT..+2, cluster ports +10,
#                      management ports +20
#   RUN=regexp         the cases to run (default: all), a go test -run
#                      pattern of TestCluster's subtests: RUN=QuorumDeleteMember
#                      runs -run 'TestCluster/QuorumDeleteMember' (a pattern
#                      with a / or starting Test is passed as it is)
#   UPDATE_GOLDEN=1    copy RabbitMQ's record to
#                      conformance/clusterconf/testdata/rabbitmq-3.10.json
#   RABBIT_BIN=/usr/lib/rabbitmq/bin
#   WARREN_ARGS="..."  more flags for every Warren node (e.g. --log-level debug)
#   OUT=dir            logs, data, records (default: a temp dir, removed)
# It never touches the RabbitMQ on 5672 (nor bench/cluster.sh's on 5701-5703):
# its nodes are wconf1..3@host with their own ports, data and log dirs,
# plugins and config files, erlang cookie and HOME.
{
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SELF=$ROOT/bench/clusterconf.sh
RABBIT_PORT=${RABBIT_PORT:-5721}
WARREN_PORT=${WARREN_PORT:-24731}
RABBIT_BIN=${RABBIT_BIN:-/usr/lib/rabbitmq/bin}
HOST=$(hostname -s)
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# --- RabbitMQ nodes wconf1..3@$HOST ---
rabbit_env() {
	local i=$1 out=$2
	echo HOME="$out/rabbit-home" RABBITMQ_NODENAME="wconf$i@$HOST" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT=$((RABBIT_PORT + i - 1)) RABBITMQ_DIST_PORT=$((RABBIT_PORT + 20000 + i - 1)) \
		RABBITMQ_MNESIA_BASE="$out/rabbit$i/mnesia" RABBITMQ_LOG_BASE="$out/rabbit$i/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$out/rabbit-home/enabled_plugins" RABBITMQ_CONFIG_FILE="$out/rabbit$i/rabbitmq.conf" \
		RABBITMQ_CONF_ENV_FILE=/dev/null RABBITMQ_PID_FILE="$out/rabbit$i/pid"
}
rctl() { local out=$1 i=$2; shift 2; env $(rabbit_env "$i" "$out") "$RABBIT_BIN/rabbitmqctl" -q -n "wconf$i@$HOST" "$@"; }
rabbit_start() {
	local out=$1 i=$2
	mkdir -p "$out/rabbit$i"
	rm -f "$out/rabbit$i/pid"
	printf 'management.tcp.port = %d\nmanagement.tcp.ip = 127.0.0.1\nloopback_users = none\n' $((RABBIT_PORT + 10000 + i - 1)) >"$out/rabbit$i/rabbitmq.conf"
	setsid env $(rabbit_env "$i" "$out") "$RABBIT_BIN/rabbitmq-server" >>"$out/rabbit$i/server.out" 2>&1 </dev/null &
	rctl "$out" "$i" wait --timeout 120 "$out/rabbit$i/pid" >/dev/null || { log "RabbitMQ node $i did not start"; return 1; }
	echo "$(cat "$out/rabbit$i/pid")" >>"$out/pids"
}
rabbit_kill() {
	local out=$1 i=$2 p
	p=$(cat "$out/rabbit$i/pid" 2>/dev/null) || return 0
	kill -9 "$p" 2>/dev/null
	while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
	rm -f "$out/rabbit$i/pid"
}

# --- Warren nodes wconf1..3@$HOST ---
warren_start() {
	local out=$1 i=$2 t
	mkdir -p "$out/warren$i"
	local seeds=127.0.0.1:$((WARREN_PORT + 10)),127.0.0.1:$((WARREN_PORT + 11)),127.0.0.1:$((WARREN_PORT + 12))
	WARREN_CLUSTER_SECRET=cluster-conformance-secret setsid "$out/bin/warren" --node-name "wconf$i@$HOST" \
		--listen "127.0.0.1:$((WARREN_PORT + i - 1))" --mgmt-listen "127.0.0.1:$((WARREN_PORT + 20 + i - 1))" \
		--prometheus-listen off --data-dir "$out/warren$i/data" \
		--cluster-listen "127.0.0.1:$((WARREN_PORT + 10 + i - 1))" --cluster-seeds "$seeds" ${WARREN_ARGS:-} >>"$out/warren$i/log" 2>&1 </dev/null &
	echo $! >"$out/warren$i/pid"
	echo $! >>"$out/pids"
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
warren_kill() {
	local out=$1 i=$2 p
	p=$(cat "$out/warren$i/pid" 2>/dev/null) || return 0
	kill -9 "$p" 2>/dev/null
	while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
	rm -f "$out/warren$i/pid"
}

# ctl: called by the suite (CC_OUT, CC_TARGET in the environment).
# delete_member N QUEUE removes node N's replica of the quorum queue QUEUE
# (vhost /), run on node N: rabbitmq-queues delete_member, warrenctl
# delete_member (DELETE /api/quorum-queues/%2F/QUEUE/members/NODE).
if [[ ${1:-} == ctl ]]; then
	op=$2 i=$3 q=${4:-}
	case $CC_TARGET:$op in
	rabbit:kill) rabbit_kill "$CC_OUT" "$i" ;;
	rabbit:start) rabbit_start "$CC_OUT" "$i" ;;
	rabbit:delete_member)
		env $(rabbit_env "$i" "$CC_OUT") "$RABBIT_BIN/rabbitmq-queues" -q -n "wconf$i@$HOST" delete_member --vhost / "$q" "wconf$i@$HOST" ;;
	warren:kill) warren_kill "$CC_OUT" "$i" ;;
	warren:start) warren_start "$CC_OUT" "$i" && warren_wait "$i" ;;
	warren:delete_member)
		"$CC_OUT/bin/warrenctl" --url "http://127.0.0.1:$((WARREN_PORT + 20 + i - 1))" --user guest --password guest \
			--vhost / delete_member "$q" "wconf$i@$HOST" ;;
	*) log "ctl: unknown $CC_TARGET $op"; exit 2 ;;
	esac
	exit
fi

if [[ -n ${RUN:-} && $RUN != */* && $RUN != Test* ]]; then RUN="TestCluster/$RUN"; fi
KEEP_OUT=1
if [[ -z ${OUT:-} ]]; then OUT=$(mktemp -d /tmp/warren-clusterconf.XXXXXX); KEEP_OUT=0; fi
mkdir -p "$OUT/bin"
: >"$OUT/pids"
WHICH=("$@")
[[ ${#WHICH[@]} == 0 ]] && WHICH=(rabbit warren)
cleanup() {
	# Only the processes this script started (their pids, recorded as they
	# started; a restarted node's too).
	while read -r p; do kill -9 "$p" 2>/dev/null; done <"$OUT/pids"
	wait 2>/dev/null
	if [[ $KEEP_OUT == 0 ]]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
log "building warren and the suite into $OUT/bin"
(cd "$ROOT" && go build -o "$OUT/bin/warren" ./cmd/warren && go build -o "$OUT/bin/warrenctl" ./cmd/warrenctl &&
	go test -c -tags clusterconf -o "$OUT/bin/clusterconf.test" ./conformance/clusterconf) || { log "build failed"; exit 1; }

# suite TARGET AMQP_PORT MGMT_PORT: runs the suite against nodes 1..3.
suite() {
	local target=$1 ap=$2 mp=$3 urls mgmts
	urls="amqp://guest:guest@127.0.0.1:$ap/,amqp://guest:guest@127.0.0.1:$((ap + 1))/,amqp://guest:guest@127.0.0.1:$((ap + 2))/"
	mgmts="http://guest:guest@127.0.0.1:$mp,http://guest:guest@127.0.0.1:$((mp + 1)),http://guest:guest@127.0.0.1:$((mp + 2))"
	local extra=()
	if [[ $target == rabbit ]]; then
		extra=(CLUSTERCONF_RECORD="$OUT/rabbitmq.json")
	elif [[ -s $OUT/rabbitmq.json ]]; then
		extra=(CLUSTERCONF_EXPECT="$OUT/rabbitmq.json")
	fi
	log "$target: running the suite"
	(cd "$ROOT/conformance/clusterconf" && env CLUSTERCONF_AMQP="$urls" CLUSTERCONF_MGMT="$mgmts" \
		CLUSTERCONF_NODES="wconf1@$HOST,wconf2@$HOST,wconf3@$HOST" CLUSTERCONF_TARGET=$target \
		CLUSTERCONF_CTL="$SELF ctl" CC_OUT="$OUT" CC_TARGET=$target "${extra[@]}" \
		"$OUT/bin/clusterconf.test" -test.v -test.timeout 20m ${RUN:+-test.run "$RUN"}) 2>&1 | tee "$OUT/$target.out"
	return "${PIPESTATUS[0]}"
}

RC=0
rabbit_run() {
	if [[ ! -x $RABBIT_BIN/rabbitmq-server ]]; then
		log "no $RABBIT_BIN/rabbitmq-server: skipping RabbitMQ"
		return
	fi
	mkdir -p "$OUT/rabbit-home"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$OUT/rabbit-home/.erlang.cookie"
	chmod 400 "$OUT/rabbit-home/.erlang.cookie"
	echo "[rabbitmq_management]." >"$OUT/rabbit-home/enabled_plugins"
	for i in 1 2 3; do rabbit_start "$OUT" $i || return 1; done
	for i in 2 3; do
		rctl "$OUT" $i stop_app && rctl "$OUT" $i join_cluster "wconf1@$HOST" && rctl "$OUT" $i start_app ||
			{ log "join_cluster of node $i failed"; return 1; }
	done
	log "RabbitMQ cluster: $(rctl "$OUT" 1 cluster_status --formatter json | jq -c '.running_nodes')"
	suite rabbit "$RABBIT_PORT" $((RABBIT_PORT + 10000)) || RC=1
	if [[ ${UPDATE_GOLDEN:-} == 1 && -s $OUT/rabbitmq.json ]]; then
		cp "$OUT/rabbitmq.json" "$ROOT/conformance/clusterconf/testdata/rabbitmq-3.10.json"
		log "golden record updated"
	fi
	for i in 1 2 3; do rabbit_kill "$OUT" $i; done
}
warren_run() {
	for i in 1 2 3; do warren_start "$OUT" $i; done
	for i in 1 2 3; do warren_wait $i || return 1; done
	suite warren "$WARREN_PORT" $((WARREN_PORT + 20)) || RC=1
	for i in 1 2 3; do warren_kill "$OUT" $i; done
}
for w in "${WHICH[@]}"; do
	case $w in
	rabbit) rabbit_run || RC=1 ;;
	warren) warren_run || RC=1 ;;
	*) log "unknown: $w (rabbit, warren)"; exit 2 ;;
	esac
done
log "done (exit $RC); logs in $OUT$([[ $KEEP_OUT == 0 ]] && echo ' (removed: set OUT to keep them)')"
exit $RC
}
