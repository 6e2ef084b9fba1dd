#!/usr/bin/env bash
# Installs what tests/gitservers needs to run real git servers on loopback: git's http-backend
# (in the git package), apache2 (mod_cgi, mod_alias, mod_auth_basic, mod_ssl ship with it),
# openssl for the test CA, and OpenSSH (sshd for the server; ssh and ssh-keygen for porchkit's git
# and the test keys). Does nothing when they are all present. Needs root for apt-get.
set -euo pipefail
missing=()
command -v git >/dev/null || missing+=(git)
command -v openssl >/dev/null || missing+=(openssl)
[ -x /usr/sbin/apache2 ] || missing+=(apache2)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
{ command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; } || missing+=(openssh-client)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "tests/gitservers/install.sh: need root to install: ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh image has no package lists; refresh them only when the packages are not known.
apt-cache show "${missing[@]}" >/dev/null 2>&1 || apt-get update -qq
# policy-rc.d 101: the package's postinst must not start a system sshd (tests start their own).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
fi
apt-get install -qq -y --no-install-recommends "${missing[@]}" >/dev/null
