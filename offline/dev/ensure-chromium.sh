#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests when it is missing; `npm test` (pretest) and .ci/run call it.
# playwright-core never downloads a browser of its own. Without root or apt-get it only says what to do
# (the browser tests then fail with the same advice); with --strict (CI) that is an error.
set -euo pipefail
chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$chromium" ]; then
  echo "chromium found at $chromium"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if command -v apt-get >/dev/null 2>&1 && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
  echo "installing Debian's chromium for the browser tests:" \
    "apt-get update && apt-get install -y --no-install-recommends chromium"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  exit 0
fi
echo "the browser tests need Chromium at $chromium: install Debian's package chromium, or set CHROMIUM_PATH" >&2
[ "${1:-}" = "--strict" ] && exit 1
exit 0
