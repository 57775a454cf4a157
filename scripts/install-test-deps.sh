#!/usr/bin/env bash
# Installs what the tests need, idempotently: Debian's Chromium and the
# Playwright driver that playwright-go expects (playwright-core from npm at
# the version playwright-go pins, with the system node beside it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v chromium >/dev/null 2>&1; then
	echo "deps: installing chromium (Debian)"
	as_root apt-get update -qq
	DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# The driver version playwright-go wants, read from its source so a bump
# of the module keeps working.
pwdir=$(cd "$root" && go list -m -f '{{.Dir}}' github.com/playwright-community/playwright-go 2>/dev/null || true)
if [ -z "$pwdir" ]; then
	(cd "$root" && go mod download github.com/playwright-community/playwright-go)
	pwdir=$(cd "$root" && go list -m -f '{{.Dir}}' github.com/playwright-community/playwright-go 2>/dev/null || true)
fi
if [ -n "$pwdir" ] && [ -f "$pwdir/run.go" ]; then
	ver=$(sed -n 's/.*playwrightCliVersion *= *"\([0-9.]*\)".*/\1/p' "$pwdir/run.go" | head -n1)
	dir=${PLAYWRIGHT_DRIVER_PATH:-$HOME/.cache/fano/playwright-driver}
	if [ ! -x "$dir/node" ] || [ "$("$dir/node" "$dir/package/cli.js" --version 2>/dev/null)" != "Version $ver" ]; then
		echo "deps: installing playwright driver $ver into $dir"
		tmp=$(mktemp -d)
		(cd "$tmp" && npm pack --silent "playwright-core@$ver" >/dev/null)
		rm -rf "$dir" && mkdir -p "$dir"
		tar -xzf "$tmp"/playwright-core-*.tgz -C "$dir"
		ln -sf "$(command -v node)" "$dir/node"
		rm -rf "$tmp"
	fi
fi
echo "deps: ok"
