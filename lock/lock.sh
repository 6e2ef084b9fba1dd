#!/usr/bin/env bash
# The lock: every package `make` and the images install, pinned with hashes (see lock/README.md).
#
#   lock.sh compile UV [DIR]   resolve pyproject.toml's ranges into DIR (default lock/), keeping
#                              the versions already pinned there wherever the ranges still allow
#   lock.sh upgrade UV         the same, moving every package to the newest version the ranges allow
#   lock.sh check UV           fail, naming the difference, when lock/ no longer matches pyproject.toml
#   lock.sh drift UV PYTHON    list the packages PYTHON's environment has at other versions than the lock
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9

compile() {  # compile UV DIR [UV-PIP-COMPILE-FLAG...]
    local uv=$1 out=$2
    shift 2
    # Resolved for every platform and Python porchkit supports, not just this machine's.
    local pip_compile=("$uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes
                       --custom-compile-command "make lock" "$@")
    "${pip_compile[@]}" pyproject.toml lock/build.in --extra test --extra lint -o "$out/dev.txt"
    # The images' set: the package's own dependencies, at exactly the versions of the full set.
    "${pip_compile[@]}" pyproject.toml --constraint lock/dev.txt -o "$out/runtime.txt"
    # The function image's set: what the KRM function imports, nothing more (lock/fn.in).
    "${pip_compile[@]}" lock/fn.in --constraint lock/dev.txt -o "$out/fn.txt"
    # The build backend alone, for building porchkit's wheel (the images' builder stage).
    "${pip_compile[@]}" lock/build.in --constraint lock/dev.txt -o "$out/build.txt"
    echo "uv==$UV_VERSION" | "${pip_compile[@]}" - -o "$out/uv.txt"
}

check() {  # check UV
    local tmp
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    cp lock/*.txt "$tmp/"
    compile "$1" "$tmp"
    if ! diff -u --label "lock (committed)" --label "lock (from pyproject.toml)" \
            <(cd lock && cat ./*.txt) <(cd "$tmp" && cat ./*.txt) \
            >"$tmp/diff"; then
        grep -E '^[-+][a-z0-9]' "$tmp/diff" | grep -v -E '^(---|\+\+\+)' >&2 || cat "$tmp/diff" >&2
        echo "lock: lock/ no longer matches pyproject.toml; run 'make lock' and commit lock/" >&2
        return 1
    fi
}

# name==version lines, names normalised as PEP 503 does (PyYAML, ruamel.yaml -> pyyaml, ruamel-yaml)
normalise() { awk -F'==' '{ n = tolower($1); gsub(/[._]+/, "-", n); print n "==" $2 }' | sort -u; }
pins() { grep -oE '^[a-zA-Z0-9][a-zA-Z0-9._-]*==[^ ;\\]+' "$1" | normalise; }

drift() {  # drift UV PYTHON
    local installed
    installed=$("$1" pip freeze --quiet --python "$2" --exclude-editable | normalise)
    local newer
    newer=$(comm -13 <(pins lock/dev.txt) <(echo "$installed"))
    if [[ -n $newer ]]; then
        echo "not as locked (lock/dev.txt has another version or none):"
        sed 's/^/  /' <<<"$newer"
    else
        echo "every installed package is at its locked version"
    fi
}

case ${1:-} in
    compile) compile "$2" "${3:-lock}" ;;
    upgrade) compile "$2" lock --upgrade ;;
    check) check "$2" ;;
    drift) drift "$2" "$3" ;;
    *) sed -n '4,8p' "$0" >&2; exit 2 ;;
esac
