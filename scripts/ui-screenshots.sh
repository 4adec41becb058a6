#!/usr/bin/env bash
# Screenshots of every page of the management UI, with a populated broker
# under traffic, into docs/ui/ (or the directory given). Needs chromium
# (apt-get install -y chromium). WARREN_UI_WARMUP (default 60s) is how long
# the charts gather samples before the first screenshot.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
out="${1:-docs/ui}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
command -v chromium >/dev/null 2>&1 || { echo "chromium is not installed: apt-get install -y chromium" >&2; exit 1; }
WARREN_UI_SCREENSHOTS="$out" WARREN_UI_WARMUP="${WARREN_UI_WARMUP:-60s}" \
  go test -count=1 -timeout 10m -run '^(TestScreenshots|TestStreamQueuePage)$' -v ./mgmt/uitest/
ls "$out"/*.png
