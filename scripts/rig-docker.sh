# Docker mode of scripts/rig.sh (RIG_DOCKER=1): sourced by rig.sh, not run alone.
#
# ../shared/yarn-rig/up.sh's own Docker mode (docker-mode.sh) does what a node needs below the
# configuration: Debian's docker.io and a daemon, the group hadoop and the user yarn (RM and
# NMs run as yarn), the setuid container-executor of the shared distribution installed
# root:hadoop 6050 under /opt, the cgroup v1 hierarchy of every node owned by yarn. On top of
# it this mode
#   - gives the rig its own copy of Hadoop, /opt/subm-rig/<rig>/hadoop-<version> (hard links
#     to one unpacked distribution; the binary and etc/ are real copies, since the binary
#     reads etc/hadoop/container-executor.cfg next to itself): two Docker rigs never share a cfg;
#   - replaces the rig's configuration with what `subm hadoop-conf` renders for it
#     (scripts/rig_docker.py: yarn-site.xml, resource-types.xml, capacity-scheduler.xml on
#     every node and the RM, container-executor.cfg beside the binary);
#   - makes the user jobs are submitted as (SUBM_RIG_USER, default subm: uid >= 1000) and a
#     Python that user can run, RIG_DIR/python: a venv of Debian's /usr/bin/python3 whose
#     subm-rig.pth adds the project and the project venv's site-packages (skein, torch, ...),
#     both read-only mountable into containers (allowed in container-executor.cfg).
# Hadoop 3.1.2 by default (RIG_HADOOP_VERSION): its own bin/container-executor.

docker_hadoop_cache=/opt/subm-rig

docker_before_up() {
  [ "$(id -u)" = 0 ] || { say "RIG_DOCKER=1 needs root (setuid container-executor, users, dockerd)"; exit 2; }
  chmod 755 "$dir"              # mktemp -d made it 0700; yarn and the job's user work in it
  unset HADOOP_HOME
  export RIG_DOCKER=1 RIG_HADOOP_VERSION=${RIG_HADOOP_VERSION:-3.1.2}
  local cache=$docker_hadoop_cache/hadoop-$RIG_HADOOP_VERSION tarball=$shared/hadoop-$RIG_HADOOP_VERSION-yarn.tar.xz
  install -d -m 755 -o root -g root "$docker_hadoop_cache"
  if ! [ -x "$cache/bin/yarn" ]; then
    [ -f "$tarball" ] || { say "no $tarball"; exit 2; }
    say "unpacking Hadoop $RIG_HADOOP_VERSION into $cache (once)"
    rm -rf "$cache.tmp" && mkdir -p "$cache.tmp"
    tar -C "$cache.tmp" --strip-components=1 -xJf "$tarball"
    mkdir -p "$cache.tmp"/share/hadoop/{hdfs,mapreduce}
    chown -R root:root "$cache.tmp" && chmod -R go-w "$cache.tmp"
    mv "$cache.tmp" "$cache"
  fi
  RIG_HADOOP=$docker_hadoop_cache/$(basename "$dir")/hadoop-$RIG_HADOOP_VERSION
  rm -rf "$(dirname "$RIG_HADOOP")"
  install -d -m 755 -o root -g root "$(dirname "$RIG_HADOOP")"
  cp -al "$cache" "$RIG_HADOOP"
  rm -rf "$RIG_HADOOP/etc" "$RIG_HADOOP/bin/container-executor"
  cp -a "$cache/etc" "$RIG_HADOOP/etc"
  [ -f "$cache/bin/container-executor" ] && cp -a "$cache/bin/container-executor" "$RIG_HADOOP/bin/"
  export RIG_HADOOP
}

# The user's Python: Debian's interpreter (the image's is the same), the project venv's packages.
docker_python() {  # $1: python that rendered (the project's venv)
  local venv=$dir/python site ver ours
  site=$("$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  ver=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  ours=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  rm -rf "$venv"
  if [ "$ver" = "$ours" ]; then
    /usr/bin/python3 -m venv --without-pip "$venv"
    printf '%s\nimport site; site.addsitedir(%s)\n' "$repo" "'$site'" \
      > "$venv/lib/python$ours/site-packages/subm-rig.pth"
  else  # another Python minor: the packages must be installed for Debian's (minutes)
    say "the project's venv is Python $ver, /usr/bin/python3 is $ours: installing the project into $venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q "$repo[yarn,torch]" >&2
    printf '%s\n' "$repo" > "$venv/lib/python$ours/site-packages/subm-rig.pth"
  fi
  chmod -R a+rX "$venv"
  if ! out=$(runuser -u "$rig_user" -- "$venv/bin/python" -c 'import skein, submarine_py, yaml' 2>&1); then
    say "user $rig_user cannot use $venv (the project or its venv must be readable by that user): $out"
    exit 1
  fi
}

docker_after_up() {  # $1: python that renders our files
  # shellcheck disable=SC1091
  source "$dir/env.sh"
  rig_user=${SUBM_RIG_USER:-subm}
  if ! id -u "$rig_user" >/dev/null 2>&1; then
    useradd -m -s /bin/bash "$rig_user"
  fi
  [ "$(id -u "$rig_user")" -ge 1000 ] || { say "user $rig_user has uid $(id -u "$rig_user") < 1000 (min.user.id)"; exit 1; }
  docker_python "$1"
  "$1" "$repo/scripts/rig_docker.py" "$dir" "$HADOOP_HOME" "$rig_user" "$dir/python" \
    || { say "rendering our hadoop-conf for the rig failed"; exit 1; }
  if ! out=$(runuser -u yarn -- "$HADOOP_HOME/bin/container-executor" --checksetup 2>&1); then
    say "container-executor --checksetup with our container-executor.cfg failed: $out"; exit 1
  fi
  # What the ResourceManager (yarn) writes beyond up.sh's folders; the user's skein state.
  install -d -o yarn -g hadoop "$dir/rm-state"
  install -d -o "$rig_user" -m 755 "$dir/skein-$rig_user" "$dir/jobs"
  echo "export SUBM_RIG_USER=$rig_user SUBM_RIG_USER_PYTHON=$dir/python/bin/python" >> "$dir/env.sh"
}

docker_yarn() {  # yarn ARGS...: as the daemons' user
  runuser -u yarn -- env HADOOP_CONF_DIR="$HADOOP_CONF_DIR" JAVA_HOME="$JAVA_HOME" "$HADOOP_HOME/bin/yarn" "$@"
}

docker_down() {  # after down.sh: containers still running from this rig, its Hadoop copy
  local c
  for c in $(docker ps -aq --filter name=container_ 2>/dev/null); do
    docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$c" 2>/dev/null | grep -q "$dir/" \
      && docker rm -f "$c" >/dev/null 2>&1
  done
  rm -rf "${docker_hadoop_cache:?}/$(basename "$dir")"
}
