#!/usr/bin/env bash
# Client libraries' own test suites against one broker, to compare Warren
# with RabbitMQ: run it once with RabbitMQ's URL and once with Warren's, and
# diff the lists of failing tests it prints (a test that fails on RabbitMQ too
# is an environment issue). Not run in CI.
#
#   amqp091  amqp091-go's integration tests (the module zip from the Go proxy
#            has its _test.go files), version from go.mod; go test -tags
#            integration with AMQP_URL. Its recovery tests find their
#            connection by client_properties.connection_name through the
#            management API on MGMT_PORT (hard-coded 15672 upstream,
#            patched here); they fail where that API is absent.
#   streadway  streadway/amqp v1.1.0's integration tests (amqp091-go's
#            predecessor, from the Go proxy), TestTLSHandshake skipped (its
#            fake server panics after the test ends).
#   amqplib  amqplib 0.10.9's mocha suite (the npm tarball has test/), URL
#            without the trailing slash.
#   pika     pika's tests/acceptance with pytest, only if PIKA_SRC names a
#            pika source tree (github.com/pika/pika; not on PyPI-free
#            mirrors); its hard-coded port 5672 is rewritten to the URL's.
#            Needs Debian's python3-pytest, python3-tornado, python3-gevent
#            (SUITE_PYTHON, default /usr/bin/python3, runs pytest).
#   amqplib2 amqplib's current node:test suite (2.x; the npm tarballs of 1.x
#            and later carry no tests), if AMQPLIB_SRC names an amqplib tree
#            (github.com/amqp-node/amqplib); its callback_api and connect
#            tests, which dial amqp://localhost, are pointed at URL.
#   acj      amqp-client.js's vitest suite (test/test.ts, amqp-session.ts,
#            amqp-codec-registry.ts), if ACJ_SRC names an amqp-client.js tree
#            (github.com/cloudamqp/amqp-client.js); vitest 3 from npm.
#   pyamqp   py-amqp's t/integration (-E rabbitmq), if PYAMQP_SRC names a
#            py-amqp tree (github.com/celery/py-amqp); needs python3-vine.
#   kombu    kombu's t/integration/test_py_amqp.py, if KOMBU_SRC names a
#            kombu tree (github.com/celery/kombu) and PYAMQP_SRC is set.
#   php      php-amqplib v3.5.3's tests/Functional with Debian's phpunit, if
#            PHPAMQPLIB_SRC names a php-amqplib tree at v3.5.3 with its tests
#            (git archive leaves them out: export-ignore); needs php-cli,
#            phpunit, php-mbstring, php-curl, php-amqplib (for phpseclib3).
#   bunny    Bunny's integration specs (higher_level_api, lower_level_api,
#            issues; not the ones that stop RabbitMQ, use toxiproxy, TLS or
#            the HTTP API), if BUNNY_SRC names a Bunny tree at tag 2.19.0
#            (Debian's ruby-amq-protocol 2.3.2 fits it); needs ruby,
#            ruby-rspec, ruby-bunny. Its vhost bunny_testbed and users
#            bunny_gem/bunny_password and bunny_reader/reader_password are
#            created through the management API on MGMT_PORT, or with
#            BUNNY_SETUP=rabbitmqctl by rabbitmqctl (add_vhost, add_user,
#            set_permissions only). Three of its examples check that the
#            default port is 5672 and fail on any other port.
#
# Usage: scripts/client-suites.sh URL [MGMT_PORT] [SUITE...]
#   e.g. scripts/client-suites.sh amqp://guest:guest@127.0.0.1:5702/ 15702
# Results go to $CLIENT_SUITES_DIR (default /tmp/warren-client-suites/<port>):
# <suite>.log, and <suite>.failed with one failing test per line.
# Needs go, node and npm (apt-get install -y nodejs npm), the Go proxy and
# the npm registry. Each suite is bounded by SUITE_TIMEOUT (default 900 s).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

url=${1:?usage: $0 URL [MGMT_PORT] [SUITE...]}
mgmt=${2:-15672}
shift $(( $# >= 2 ? 2 : 1 ))
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(amqp091 streadway amqplib amqplib2 acj pika pyamqp kombu php bunny)
limit=${SUITE_TIMEOUT:-900}

hostport=${url#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
port=${hostport##*:}
[ "$port" = "$hostport" ] && port=5672

out=${CLIENT_SUITES_DIR:-/tmp/warren-client-suites/$port}
src=$out/src
mkdir -p "$src"
echo "results in $out"

run_amqp091() {
	local ver dir
	ver=$(awk '$1 == "github.com/rabbitmq/amqp091-go" {print $2}' "$root/go.mod")
	dir=$(cd "$src" && GOFLAGS=-mod=mod timeout 300 go mod download -json "github.com/rabbitmq/amqp091-go@$ver" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || { echo "amqp091: go mod download failed"; return 1; }
	rm -rf "$src/amqp091-go" && cp -r "$dir" "$src/amqp091-go" && chmod -R u+w "$src/amqp091-go"
	(
		cd "$src/amqp091-go" || exit 1
		sed -i 's|"15672")|os.Getenv("AMQP_MGMT_PORT"))|' recovery_test.go
		sed -i '0,/^\t"net\/url"$/s||\t"net/url"\n\t"os"|' recovery_test.go
		sed -i 's|"http://localhost:15672/api/connections/"|"http://localhost:"+os.Getenv("AMQP_MGMT_PORT")+"/api/connections/"|' internal/utils/http.go
		sed -i 's|^\t"net/http"$|\t"net/http"\n\t"os"|' internal/utils/http.go
		# RABBITMQ_RABBITMQCTL_PATH stays unset: the tests that need it would
		# change the broker's memory watermark.
		AMQP_URL=$url AMQP_MGMT_PORT=$mgmt timeout "$limit" go test -tags integration -count=1 -json \
			-timeout "$((limit - 30))s" . >"$out/amqp091.json" 2>&1
	)
	go_summary amqp091
}

# go_summary SUITE: counts and failing tests of $out/SUITE.json (go test -json).
go_summary() {
	python3 - "$out/$1.json" "$out/$1.failed" "$1" <<-'EOF'
		import collections, json, sys
		res = {}
		for line in open(sys.argv[1]):
		    try:
		        e = json.loads(line)
		    except ValueError:
		        continue
		    if e.get("Test") and e.get("Action") in ("pass", "fail", "skip"):
		        res[e["Test"]] = e["Action"]
		c = collections.Counter(res.values())
		open(sys.argv[2], "w").write("".join(t + "\n" for t, a in sorted(res.items()) if a == "fail"))
		print("%s: %d passed, %d failed, %d skipped" % (sys.argv[3], c["pass"], c["fail"], c["skip"]))
	EOF
}

run_streadway() {
	local dir
	dir=$(cd "$src" && GOFLAGS=-mod=mod timeout 300 go mod download -json github.com/streadway/amqp@v1.1.0 |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -n "$dir" ] || { echo "streadway: go mod download failed"; return 1; }
	rm -rf "$src/streadway" && cp -r "$dir" "$src/streadway" && chmod -R u+w "$src/streadway"
	(
		cd "$src/streadway" || exit 1
		AMQP_URL=$url timeout "$limit" go test -tags integration -count=1 -json -skip TestTLSHandshake \
			-timeout "$((limit - 30))s" . >"$out/streadway.json" 2>&1
	)
	go_summary streadway
}

run_amqplib2() {
	if [ -z "${AMQPLIB_SRC:-}" ] || [ ! -f "$AMQPLIB_SRC/test/channel_api.test.js" ]; then
		echo "amqplib2: skipped (set AMQPLIB_SRC to an amqplib source tree)"
		return 0
	fi
	rm -rf "$src/amqplib2" && cp -r "$AMQPLIB_SRC" "$src/amqplib2"
	(
		cd "$src/amqplib2" || exit 1
		timeout 300 npm install --no-audit --no-fund --ignore-scripts --no-save claire@0.4.1 >/dev/null 2>&1 ||
			{ echo "amqplib2: npm install failed"; exit 1; }
		sed -i "s|connect((|connect(process.env.URL, (|g; s|connect(dom.bind(|connect(process.env.URL, dom.bind(|" \
			test/callback_api.test.js
		sed -i "s|'amqp://localhost'|'amqp://${hostport}'|g; s|'amqp://localhost?|'amqp://${hostport}?|g" test/connect.test.js
		URL=${url%/} timeout "$limit" node --test --test-timeout=10000 --test-reporter=tap test/ >"$out/amqplib2.tap" 2>&1
		grep -E '^ *not ok' "$out/amqplib2.tap" >"$out/amqplib2.failed"
		echo "amqplib2: $(sed -n 's/^# pass //p' "$out/amqplib2.tap") passed, $(sed -n 's/^# fail //p' "$out/amqplib2.tap") failed, $(sed -n 's/^# skipped //p' "$out/amqplib2.tap") skipped"
	)
}

run_acj() {
	if [ -z "${ACJ_SRC:-}" ] || [ ! -f "$ACJ_SRC/test/test.ts" ]; then
		echo "acj: skipped (set ACJ_SRC to an amqp-client.js source tree)"
		return 0
	fi
	rm -rf "$src/acj" && cp -r "$ACJ_SRC" "$src/acj"
	(
		cd "$src/acj" || exit 1
		rm -rf node_modules package-lock.json
		# Only vitest is needed; the project's own dev dependencies (browser
		# testing, lint) do not resolve together offline.
		echo '{"name":"acj-tests","type":"module","private":true}' >package.json
		timeout 600 npm install --no-audit --no-fund --ignore-scripts vitest@3 >/dev/null 2>&1 ||
			{ echo "acj: npm install vitest failed"; exit 1; }
		sed -i "s|\"amqp://127.0.0.1\"|\"amqp://${hostport}\"|; s|amqp://127.0.0.1?|amqp://${hostport}?|g" \
			test/test.ts test/amqp-session.ts
		timeout "$limit" ./node_modules/.bin/vitest run --reporter=json --outputFile="$out/acj.json" \
			test/test.ts test/amqp-session.ts test/amqp-codec-registry.ts >"$out/acj.log" 2>&1
		python3 - "$out/acj.json" "$out/acj.failed" <<-'EOF'
			import json, sys
			d = json.load(open(sys.argv[1]))
			failed = [a["fullName"] for r in d["testResults"] for a in r["assertionResults"] if a["status"] == "failed"]
			open(sys.argv[2], "w").write("".join(f + "\n" for f in failed))
			print("acj: %d passed, %d failed, %d skipped" % (d["numPassedTests"], d["numFailedTests"], d["numPendingTests"]))
		EOF
	)
}

run_amqplib() {
	local ver=0.10.9
	(
		cd "$src" || exit 1
		if [ ! -d amqplib/node_modules ]; then
			rm -rf amqplib package && timeout 300 npm pack "amqplib@$ver" >/dev/null 2>&1 &&
				tar xzf "amqplib-$ver.tgz" && mv package amqplib &&
				(cd amqplib && timeout 600 npm install --no-audit --no-fund --ignore-scripts \
					buffer-more-ints@~1.0.0 url-parse@~1.5.10 claire@0.4.1 mocha@^9.2.2 >/dev/null 2>&1) ||
				{ echo "amqplib: npm pack/install failed"; exit 1; }
		fi
		cd amqplib || exit 1
		URL=${url%/} timeout "$limit" ./node_modules/.bin/mocha -u tdd --exit -R json test/ >"$out/amqplib.json" 2>"$out/amqplib.log"
		python3 - "$out/amqplib.json" "$out/amqplib.failed" <<-'EOF'
			import json, sys
			d = json.load(open(sys.argv[1]))
			open(sys.argv[2], "w").write("".join(t["fullTitle"] + "\n" for t in d["failures"]))
			s = d["stats"]
			print("amqplib: %d passed, %d failed, %d skipped" % (s["passes"], s["failures"], s["pending"]))
		EOF
	)
}

run_pika() {
	if [ -z "${PIKA_SRC:-}" ] || [ ! -d "$PIKA_SRC/tests/acceptance" ]; then
		echo "pika: skipped (set PIKA_SRC to a pika source tree)"
		return 0
	fi
	rm -rf "$src/pika" && cp -r "$PIKA_SRC" "$src/pika"
	(
		cd "$src/pika" || exit 1
		sed -i "s/\b5672\b/$port/g" tests/acceptance/*.py tests/base/*.py
		# twisted_adapter_tests.py is left out: Debian's twisted is not assumed.
		timeout "$limit" "${SUITE_PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider --junitxml="$out/pika.xml" \
			tests/acceptance/async_adapter_tests.py tests/acceptance/blocking_adapter_test.py \
			tests/acceptance/enforce_one_basicget_test.py tests/acceptance/io_services_tests.py \
			tests/acceptance/thread_safe_bounded_queue_test.py tests/acceptance/thread_safe_connection_test.py \
			>"$out/pika.log" 2>&1
	)
	junit_summary pika
}

# junit_summary SUITE: counts and failing tests of $out/SUITE.xml (pytest).
junit_summary() {
	python3 - "$out/$1.xml" "$out/$1.failed" "$1" <<-'EOF'
		import sys, xml.etree.ElementTree as ET
		n = {"pass": 0, "fail": 0, "skip": 0}
		failed = []
		for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
		    st = "pass"
		    for ch in tc:
		        if ch.tag in ("failure", "error"):
		            st = "fail"
		        elif ch.tag == "skipped":
		            st = "skip"
		    n[st] += 1
		    if st == "fail":
		        failed.append(tc.get("classname") + "::" + tc.get("name"))
		open(sys.argv[2], "w").write("".join(f + "\n" for f in failed))
		print("%s: %d passed, %d failed, %d skipped" % (sys.argv[3], n["pass"], n["fail"], n["skip"]))
	EOF
}

run_pyamqp() {
	if [ -z "${PYAMQP_SRC:-}" ] || [ ! -d "$PYAMQP_SRC/t/integration" ]; then
		echo "pyamqp: skipped (set PYAMQP_SRC to a py-amqp source tree)"
		return 0
	fi
	(
		cd "$PYAMQP_SRC" || exit 1
		PYTHONPATH=. RABBITMQ_HOST=${hostport%:*} RABBITMQ_5672_TCP=$port timeout "$limit" \
			"${SUITE_PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider -E rabbitmq \
			--junitxml="$out/pyamqp.xml" t/integration >"$out/pyamqp.log" 2>&1
	)
	junit_summary pyamqp
}

run_kombu() {
	if [ -z "${KOMBU_SRC:-}" ] || [ -z "${PYAMQP_SRC:-}" ] || [ ! -d "$KOMBU_SRC/t/integration" ]; then
		echo "kombu: skipped (set KOMBU_SRC and PYAMQP_SRC to kombu and py-amqp source trees)"
		return 0
	fi
	(
		cd "$KOMBU_SRC" || exit 1
		PYTHONPATH=.:$PYAMQP_SRC RABBITMQ_HOST=${hostport%:*} RABBITMQ_5672_TCP=$port timeout "$limit" \
			"${SUITE_PYTHON:-/usr/bin/python3}" -m pytest -q -p no:cacheprovider -E py-amqp \
			--junitxml="$out/kombu.xml" t/integration/test_py_amqp.py >"$out/kombu.log" 2>&1
	)
	junit_summary kombu
}

run_php() {
	if [ -z "${PHPAMQPLIB_SRC:-}" ] || [ ! -d "$PHPAMQPLIB_SRC/tests/Functional" ]; then
		echo "php: skipped (set PHPAMQPLIB_SRC to a php-amqplib tree at v3.5.3 with tests/)"
		return 0
	fi
	rm -rf "$src/php" && cp -r "$PHPAMQPLIB_SRC" "$src/php"
	(
		cd "$src/php" || exit 1
		mkdir -p vendor
		# composer is not reachable: a PSR-4 loader for the library and its
		# tests, phpseclib3 from Debian.
		cat >vendor/autoload.php <<-'EOF'
			<?php
			require_once '/usr/share/php/phpseclib3/autoload.php';
			spl_autoload_register(function ($class) {
			    $map = [
			        'PhpAmqpLib\\Tests\\Functional\\' => __DIR__ . '/../tests/Functional/',
			        'PhpAmqpLib\\Tests\\Unit\\' => __DIR__ . '/../tests/Unit/',
			        'PhpAmqpLib\\' => __DIR__ . '/../PhpAmqpLib/',
			    ];
			    foreach ($map as $prefix => $dir) {
			        if (strncmp($class, $prefix, strlen($prefix)) === 0) {
			            $f = $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
			            if (is_file($f)) {
			                require $f;
			            }
			            return;
			        }
			    }
			});
		EOF
		TEST_RABBITMQ_HOST=${hostport%:*} TEST_RABBITMQ_PORT=$port timeout "$limit" phpunit --no-coverage \
			-c phpunit.xml.dist --testsuite "Functional Tests" --log-junit "$out/php.xml" >"$out/php.log" 2>&1
	)
	junit_summary php
}

run_bunny() {
	if [ -z "${BUNNY_SRC:-}" ] || [ ! -d "$BUNNY_SRC/spec/higher_level_api" ]; then
		echo "bunny: skipped (set BUNNY_SRC to a Bunny source tree at tag 2.19.0)"
		return 0
	fi
	if [ "${BUNNY_SETUP:-api}" = rabbitmqctl ]; then
		rabbitmqctl add_vhost bunny_testbed
		rabbitmqctl add_user bunny_gem bunny_password
		rabbitmqctl add_user bunny_reader reader_password
		rabbitmqctl set_permissions -p bunny_testbed bunny_gem ".*" ".*" ".*"
		rabbitmqctl set_permissions -p bunny_testbed guest ".*" ".*" ".*"
		rabbitmqctl set_permissions -p bunny_testbed bunny_reader "^---$" "^---$" ".*"
	elif [ "${BUNNY_SETUP:-api}" = api ]; then
		local api="http://${hostport%:*}:$mgmt/api"
		put() { curl -fsS -u guest:guest -H content-type:application/json -X PUT "$api/$1" -d "$2" >/dev/null; }
		put vhosts/bunny_testbed '{}' &&
			put users/bunny_gem '{"password":"bunny_password","tags":""}' &&
			put users/bunny_reader '{"password":"reader_password","tags":""}' &&
			put permissions/bunny_testbed/bunny_gem '{"configure":".*","write":".*","read":".*"}' &&
			put permissions/bunny_testbed/guest '{"configure":".*","write":".*","read":".*"}' &&
			put permissions/bunny_testbed/bunny_reader '{"configure":"^---$","write":"^---$","read":".*"}' ||
			{ echo "bunny: set-up through $api failed"; return 1; }
	fi
	rm -rf "$src/bunny" && cp -r "$BUNNY_SRC" "$src/bunny"
	(
		cd "$src/bunny" || exit 1
		sed -i 's/^require .bundler.$//; s/^Bundler.require.*$//' spec/spec_helper.rb
		cat >spec/port_override.rb <<-'EOF'
			require "amq/protocol"
			AMQ::Protocol.send(:remove_const, :DEFAULT_PORT)
			AMQ::Protocol.const_set(:DEFAULT_PORT, ENV.fetch("BUNNY_PORT").to_i)
		EOF
		files=$(ls spec/higher_level_api/integration/*_spec.rb spec/lower_level_api/integration/*_spec.rb \
			spec/issues/*_spec.rb | grep -v -E 'toxiproxy|connection_recovery_spec|connection_stop_spec|tls_connection')
		# shellcheck disable=SC2086
		BUNNY_PORT=$port timeout "$limit" rspec -I lib -r ./spec/port_override.rb -r ./spec/spec_helper.rb \
			--format json --out "$out/bunny.json" --format progress $files >"$out/bunny.log" 2>&1
		python3 - "$out/bunny.json" "$out/bunny.failed" <<-'EOF'
			import json, sys
			d = json.load(open(sys.argv[1]))
			ex = d["examples"]
			failed = [e["full_description"] for e in ex if e["status"] == "failed"]
			open(sys.argv[2], "w").write("".join(f + "\n" for f in failed))
			print("bunny: %d passed, %d failed, %d skipped" % (
			    sum(e["status"] == "passed" for e in ex), len(failed), sum(e["status"] == "pending" for e in ex)))
		EOF
	)
}

for s in "${suites[@]}"; do
	"run_$s"
done
