#!/usr/bin/env bash
# Installs what tests/gitservers needs to run real git servers on loopback: git's http-backend
# (in the git package), apache2 (mod_cgi, mod_alias, mod_auth_basic, mod_ssl ship with it) and
# openssl for the test CA. Does nothing when they are all present. Needs root for apt-get.
set -euo pipefail
missing=()
command -v git >/dev/null || missing+=(git)
command -v openssl >/dev/null || missing+=(openssl)
[ -x /usr/sbin/apache2 ] || missing+=(apache2)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "tests/gitservers/install.sh: need root to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh image has no package lists; refresh them only when the packages are not known.
apt-cache show "${missing[@]}" >/dev/null 2>&1 || apt-get update -qq
apt-get install -qq -y --no-install-recommends "${missing[@]}" >/dev/null
