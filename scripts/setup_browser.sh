#!/usr/bin/env bash
# Install the headless browser the report test needs (tests/test_report_html.py opens report.html in it):
# Debian's `chromium` package. Idempotent: does nothing when a Chromium is already on PATH. Run as root (or
# with sudo available); says clearly what to do when it cannot install.
set -euo pipefail
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null 2>&1; then
    echo "== browser: $(command -v "$candidate") present"
    exit 0
  fi
done
echo "== browser: installing Debian's chromium (for the report.html test)"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup_browser.sh: cannot install chromium: not root and no sudo. Install it yourself" \
         "(apt-get install chromium) or put a Chromium on PATH; tests/test_report_html.py fails without one." >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup_browser.sh: cannot install chromium: no apt-get on this system. Install Chromium (or Chrome)" \
       "with your package manager; tests/test_report_html.py fails without one." >&2
  exit 1
fi
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; }; then
  echo "setup_browser.sh: 'apt-get install chromium' failed (see above); tests/test_report_html.py fails" \
       "without a browser." >&2
  exit 1
fi
echo "== browser: $(command -v chromium) installed"
