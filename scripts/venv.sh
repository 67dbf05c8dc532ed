# Sourced by scripts/example.sh and scripts/test.sh: make sure the project's
# virtualenv exists and holds submarine-py (editable) with the given extras,
# then put its bin/ first on PATH so `python`, `pip` and `subm` are the venv's.
#
#   . scripts/venv.sh
#   subm_venv 'torch'              # pip install -e '.[torch]' unless already done
#
# Why a venv: Debian 12's own python3 is "externally managed" (PEP 668), so
# `pip install` into it is refused.  The venv is `.venv` in the repository
# (SUBM_VENV=/some/dir to use another); `python3` on PATH creates it.  Where
# `python3 -m venv` cannot work (Debian without python3-venv), root installs
# python3-venv with apt-get; anyone else is told what to install.
#
# Quick when done: a stamp in the venv records the extras and a hash of
# pyproject.toml; while they match (and the package imports), pip is not run.

_venv_say() { echo "venv: $*" >&2; }

subm_apt_install() {  # PKG...: apt-get install (root), the package lists updated first only when that fails; output on stderr
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" \
        || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"; }; } >&2
}

_venv_can_create() {
    # `python3 -m venv` needs ensurepip (Debian ships it in python3-venv).
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1
}

_venv_install_python3_venv() {
    local pkg="python3-venv"
    if [ "$(id -u)" != 0 ]; then
        _venv_say "\`python3 -m venv\` is unavailable (no ensurepip). Install it, then run this again:"
        _venv_say "    sudo apt-get install $pkg"
        return 1
    fi
    command -v apt-get >/dev/null 2>&1 || {
        _venv_say "\`python3 -m venv\` is unavailable and there is no apt-get: install Python's venv module"
        return 1
    }
    _venv_say "installing $pkg with apt-get (python3 -m venv needs it)"
    subm_apt_install "$pkg" || { _venv_say "apt-get install $pkg failed"; return 1; }
    _venv_can_create
}

_venv_kerberos_headers() {  # the kerberos extra's requests-gssapi builds python-gssapi against MIT Kerberos (no Linux wheel)
    local need=""
    command -v krb5-config >/dev/null 2>&1 || need="libkrb5-dev"
    command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || need="${need:+$need }gcc"
    [ -n "$need" ] || return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        _venv_say "the kerberos extra builds python-gssapi against MIT Kerberos with a C compiler: install them, then run this again:"
        _venv_say "    sudo apt-get install $need    (RHEL: sudo dnf install krb5-devel gcc)"
        return 1
    fi
    _venv_say "installing $need with apt-get (the kerberos extra's python-gssapi builds with it)"
    # shellcheck disable=SC2086
    subm_apt_install $need || { _venv_say "apt-get install $need failed"; return 1; }
}

subm_venv() {  # extras (comma-separated, may be empty)
    local extras="${1:-}" repo venv stamp want spec have missing e
    repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="${SUBM_VENV:-$repo/.venv}"
    stamp="$venv/.subm-installed"
    spec="$repo${extras:+[$extras]}"

    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
        command -v python3 >/dev/null 2>&1 || { _venv_say "no python3 on PATH: install Python 3.9 or newer"; return 1; }
        python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
            || { _venv_say "$(python3 -V 2>&1) is too old: submarine-py needs Python 3.9 or newer"; return 1; }
        _venv_can_create || _venv_install_python3_venv || return 1
        _venv_say "creating $venv with $(command -v python3) ($(python3 -V 2>&1))"
        rm -rf "$venv"
        python3 -m venv "$venv" || { _venv_say "python3 -m venv $venv failed"; return 1; }
    fi

    # The stamp: pyproject.toml's checksum, then the extras installed since it last changed.
    want="$(cksum <"$repo/pyproject.toml" | cut -d' ' -f1) $repo"
    have=""
    if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$want" ] \
            && "$venv/bin/python" -I -c 'import submarine_py' >/dev/null 2>&1; then
        have="$(tail -n +2 "$stamp")"
    fi
    missing=""
    for e in ${extras//,/ } _base; do
        printf '%s\n' "$have" | grep -qxF "$e" || missing="$missing $e"
    done
    if [ -n "$missing" ]; then
        case ",$extras," in *,kerberos,*) _venv_kerberos_headers || return 1 ;; esac
        _venv_say "installing submarine-py${extras:+[$extras]} into $venv"
        "$venv/bin/python" -m pip install -q -e "$spec" || { _venv_say "pip install failed"; return 1; }
        { echo "$want"; printf '%s\n' "$have" | grep -v '^$' || true; for e in $missing; do echo "$e"; done; } >"$stamp.tmp"
        mv -f "$stamp.tmp" "$stamp"
    fi
    export VIRTUAL_ENV="$venv"
    export PATH="$venv/bin:$PATH"
    hash -r 2>/dev/null || true
}
