#!/usr/bin/env bash
# Install a real Redmine 5 from Debian bookworm packages for the tests (tests/redmine_server.py starts it).
# Idempotent; run as root. CI runs it on a fresh machine before the tests. See
# ../shared/reference/redmine-ci.md. Nothing here starts a server or seeds data: the test helper does that.
set -euo pipefail

REDMINE_DIR=/usr/share/redmine

if [ "$(id -u)" -ne 0 ]; then
    echo "redmine.sh: run as root (it installs Debian packages)" >&2
    exit 1
fi

if ! dpkg-query -W -f='${Status}\n' redmine redmine-sqlite ruby-webrick 2>/dev/null \
        | grep -c "install ok installed" | grep -qx 3; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -q --no-install-recommends redmine redmine-sqlite ruby-webrick
fi

# The packaged Gemfile has no web server; Redmine's Gemfile reads Gemfile.local.
if ! grep -qs '^gem "webrick"' "$REDMINE_DIR/Gemfile.local"; then
    echo 'gem "webrick"' > "$REDMINE_DIR/Gemfile.local"
    rm -f /var/lib/redmine/Gemfile.lock   # let bundler re-resolve with webrick
fi

# Enabling REST is a database setting; the helper does it again (cheaply) on every start, but doing it here
# also proves that Rails boots against the packaged database, so a broken install fails here, not in pytest.
cd "$REDMINE_DIR"
RAILS_ENV=production bin/rails runner 'Setting.rest_api_enabled = "1"; puts "redmine #{Redmine::VERSION} ready"'
