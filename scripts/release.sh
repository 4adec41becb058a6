#!/usr/bin/env bash
# Builds release binaries of warren and warrenctl with the version and
# commit stamped in (warren --version), static (CGO_ENABLED=0), for each
# platform in $PLATFORMS, into dist/VERSION/, with the man page, the
# systemd unit, the LICENSE and SHA-256 sums.
#
#   scripts/release.sh            # version from git describe
#   scripts/release.sh v1.2.0
#   PLATFORMS="linux/amd64" scripts/release.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

version="${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
commit="$(git rev-parse HEAD 2>/dev/null || true)"
if [ -n "$commit" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
platforms="${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
out="dist/$version"
pkg=github.com/warrenmq/warren/internal/buildinfo
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit"

rm -rf "$out"
mkdir -p "$out"
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  dir="$out/warren-$version-$os-$arch"
  mkdir -p "$dir"
  for cmd in warren warrenctl; do
    CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -buildvcs=false \
      -ldflags "$ldflags" -o "$dir/$cmd" "./cmd/$cmd"
  done
  cp LICENSE README.md packaging/warren.service "$dir/"
  tar -C "$out" -czf "$dir.tar.gz" "$(basename "$dir")"
  rm -rf "$dir"
done
# The man page comes from the flag definitions of a binary of this host.
go build -buildvcs=false -ldflags "$ldflags" -o "$out/warren.host" ./cmd/warren
"$out/warren.host" --man-page > "$out/warren.8"
"$out/warren.host" --version
rm "$out/warren.host"
(cd "$out" && sha256sum -- *.tar.gz warren.8 > SHA256SUMS)
ls -l "$out"
