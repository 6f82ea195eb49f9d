#!/usr/bin/env bash
# Chromium for the tests that open a written 3-D view in a real headless browser (test/views/test_browser.py).
# Run by `make test` (so by CI) before pytest, never by `make setup`: only the test environment needs a browser.
# Debian's `chromium` package through apt-get, nothing from outside the package registries. Without apt-get, or
# without root and password-less sudo, it says so in one line and leaves it to you; the browser tests then skip,
# except under CI=true, where they fail (CI must run them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log_dir="${VTM_VENV:-$root/.venv}/.vtm-setup"
say() { echo "browser: $*"; }

if [ -n "${VTM_CHROMIUM:-}" ]; then
  [ -x "$VTM_CHROMIUM" ] && { say "using $VTM_CHROMIUM"; exit 0; }
  say "VTM_CHROMIUM=$VTM_CHROMIUM is not an executable"; exit 1
fi
for name in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$name" >/dev/null 2>&1; then say "$(command -v "$name") is installed"; exit 0; fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  say "skipped: no apt-get here; install Chromium to run the browser tests (they skip without it)"; exit 0
fi
sudo=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
    say "skipped: installing Debian's chromium needs root (sudo apt-get install chromium); the browser tests skip"
    exit 0
  fi
fi
mkdir -p "$log_dir"
log="$log_dir/browser.log"
say "installing Debian's chromium package (apt-get); log: $log"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends chromium > "$log" 2>&1; then
  # a fresh container has no package lists yet
  if ! { $sudo apt-get update && $sudo apt-get install -y --no-install-recommends chromium; } >> "$log" 2>&1; then
    tail -n 5 "$log" >&2
    say "apt-get could not install chromium (see $log); the browser tests skip (and fail under CI)"
    exit 0
  fi
fi
say "installed $(command -v chromium)"
