#!/usr/bin/env bash
# Install what the tests need into the project's virtualenv (.venv), then run
# them from it.  Idempotent and quick once installed; meant for a fresh Debian 12
# machine as root (CI runs it through .ci/run), works as any user with python3-venv.
#
#   bash scripts/test.sh                 # everything that can run here
#   bash scripts/test.sh -m unit         # arguments go to pytest
#   source /tmp/yarn-rig/env.sh && bash scripts/test.sh -m yarn   # the YARN tests, on purpose
#
# Steps:
#   1. .venv (scripts/venv.sh: `python3 -m venv`, python3-venv from apt-get when missing), then
#      pip install -e '.[test,yarn,torch,sweep]' into it, skipped when already done
#   2. the tensorflow extra (tensorflow-cpu, tensorboard), only when either is missing from the venv
#   3. MIT Kerberos's clients (krb5-user: kinit, klist) as root, where kinit is missing
#   4. a Docker daemon and the test image localhost/subm-test:bookworm; without them the
#      docker tests skip
#   5. .venv/bin/python -m pytest "$@"; pytest's exit code 5 ("no tests collected") counts as success.
#
# Tests needing YARN run only when HADOOP_CONF_DIR names a cluster: a rig that happens to be
# up (/tmp/yarn-rig) is never used unless you source its env.sh yourself. The docker_yarn
# tests run only when SUBM_DOCKER_RIG names a Docker-mode rig (RIG_DOCKER=1 scripts/rig.sh).
# CI (.ci/run) runs this script inside scripts/with-rig.sh, which starts (and stops) a rig of
# its own: once plain, for every test but docker_yarn, once in Docker mode for those.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "test.sh: $*" >&2; }

# Into the project's virtualenv (.venv; Debian's own python3 refuses `pip install`).
. scripts/venv.sh
subm_venv 'test,yarn,torch,sweep' || { say "cannot set up the virtualenv"; exit 1; }

if ! python -c 'import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, ("tensorflow", "tensorboard"))))' \
        >/dev/null 2>&1; then
    say "installing the tensorflow extra (tensorflow-cpu, tensorboard)"
    python -m pip install -q -e '.[tensorflow]' || say "tensorflow-cpu install failed: tensorflow tests will skip"
fi

# MIT Kerberos's clients (kinit, klist): the secure-cluster checks that need no cluster use them.
if ! command -v kinit >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing krb5-user (kinit, klist) with apt-get"
    subm_apt_install krb5-user 2>/dev/null || say "krb5-user not installed: the Kerberos checks that need kinit will skip"
fi

if bash scripts/docker-up.sh; then
    bash scripts/test-image.sh >/dev/null || say "test image not built: docker tests will skip"
else
    echo "docker unavailable: docker tests will skip"
fi

if [ -z "${HADOOP_CONF_DIR:-}" ] && [ -f /tmp/yarn-rig/env.sh ]; then
    echo "yarn tests skip without HADOOP_CONF_DIR; to run them on the rig: source /tmp/yarn-rig/env.sh && bash scripts/test.sh -m yarn"
fi

python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    say "pytest collected no tests (exit 5); counting that as success"
    rc=0
fi
exit "$rc"
