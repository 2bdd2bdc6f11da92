#!/bin/sh
# Debian's Chromium for the browser tests (Playwright drives it; Playwright's own browser download is not
# reachable from this kind of machine). Installed once; later runs find it and return at once.
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "The browser tests need Debian's chromium: run 'sudo apt-get install chromium' once." >&2
    exit 1
fi
echo "Installing Debian's chromium for the browser tests (first run only)…"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
