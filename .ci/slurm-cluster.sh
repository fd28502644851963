#!/usr/bin/env bash
# A throwaway Slurm cluster on this machine, for CI and for trying the slurm/ scripts:
#   .ci/slurm-cluster.sh start    # munged, slurmctld, and two slurmd nodes cn1 cn2 (idempotent)
#   .ci/slurm-cluster.sh stop     # stops only the daemons this script started
#   .ci/slurm-cluster.sh status
#   .ci/slurm-cluster.sh share PATH  # the class's users may reach PATH (a Python in root's home)
# Needs root and Debian's packages: apt-get install slurmctld slurmd slurm-client munge slurmdbd
# mariadb-server.
# Accounting: slurmdbd on a MariaDB database records every job and step, so `sacct` answers with
# the scheduler's own record (state, elapsed time, allocated TRES, MaxRSS, TotalCPU) and keeps
# each job's batch script and environment. As at a centre, a user sees only their own jobs
# (PrivateData=jobs); a class lives here: two learners and an instructor (Unix users), the
# course's account, and the instructor its coordinator, who reads the learners' records.
# Each node advertises 16 CPUs and 4 fake GPUs (GRES backed by character devices), so GPU scripts
# schedule and get CUDA_VISIBLE_DEVICES; the CPU variants of the scripts run the training.
# Settings, pitfalls and what was measured with them: docs/test-cluster.md.
set -euo pipefail

STATE=${COURSE_SLURM_STATE:-/var/lib/course-slurm}
CONF_DIR=/etc/slurm
MARKER="# written by .ci/slurm-cluster.sh"
NODES=(cn1 cn2)
ACCOUNT=course  # the course's account, as a centre gives one to a course
LEARNERS=(learner1 learner2)
INSTRUCTOR=instructor
DB_SOCKET=/run/mysqld/mysqld.sock
DB_PASSWORD=course-accounting  # a throwaway database on loopback, for the test cluster only

die() { echo "slurm-cluster: $*" >&2; exit 1; }

cluster_up() {
    # Both nodes answer and are usable (idle, mixed or allocated).
    local states
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        grep -Eq "^$n (idle|mix|alloc)" <<<"$states" || return 1
    done
}

write_config() {
    local host
    host=$(hostname -s)
    mkdir -p "$STATE"/{ctld,log,dev} "$STATE"/spool/{cn1,cn2}
    for i in 0 1 2 3; do
        # Fake GPUs: Slurm accepts character devices only (/dev/null's numbers will do).
        [ -c "$STATE/dev/gpu$i" ] || mknod "$STATE/dev/gpu$i" c 1 3
    done
    cat >"$CONF_DIR/slurm.conf" <<EOF
$MARKER; removed by its stop.
ClusterName=course
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
# Short credential lifetime: a requeued job otherwise waits about 120 s to start again.
AuthInfo=cred_expire=10
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
MailProg=/bin/true
# cgroups track and kill every process of a job; linuxproc leaked orphans.
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
# Memory is allocated (and, with ConstrainRAMSpace, enforced): a job without --mem gets 2000 MB
# per CPU, so jobs still share a node.
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=2000
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=1
MinJobAge=5
# Accounting: every job and step goes to slurmdbd (sacct reads it back). Tasks are sampled every
# second, so a job of a few seconds still gets its MaxRSS and TotalCPU.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageTRES=gres/gpu
# Each job's batch script, environment and comment are kept (sacct --batch-script, --env-vars;
# a course program leaves its result in its job's comment: course_utils.witness).
AccountingStoreFlags=job_script,job_env,job_comment
# A user sees only their own jobs (root and the account's coordinators see more).
PrivateData=jobs
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
# Advertise more CPUs than the machine has (the nodes share its cores), so test jobs overlap.
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=cn1 NodeHostname=$host NodeAddr=127.0.0.1 Port=17001 CPUs=16 RealMemory=32000 Gres=gpu:4 State=UNKNOWN
NodeName=cn2 NodeHostname=$host NodeAddr=127.0.0.1 Port=17002 CPUs=16 RealMemory=32000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=cn[1-2] Default=YES MaxTime=UNLIMITED State=UP OverSubscribe=NO
EOF
    cat >"$CONF_DIR/gres.conf" <<EOF
$MARKER
AutoDetect=off
NodeName=cn[1-2] Name=gpu File=$STATE/dev/gpu[0-3]
EOF
    cat >"$CONF_DIR/cgroup.conf" <<EOF
$MARKER
ConstrainCores=no
# A job's --mem is enforced (cgroup v1 memory): exceeding it ends the step with an OOM kill, as
# on a centre's cluster (lesson 09 provokes it). Jobs without --mem get the node's RealMemory.
ConstrainRAMSpace=yes
ConstrainDevices=no
EOF
    cat >"$CONF_DIR/slurmdbd.conf" <<EOF
$MARKER
AuthType=auth/munge
DbdHost=$host
DbdAddr=127.0.0.1
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=course_slurm_acct
StorageUser=slurm
StoragePass=$DB_PASSWORD
LogFile=$STATE/log/slurmdbd.log
PidFile=$STATE/slurmdbd.pid
# sacct shows a user their own jobs only, "unless they are coordinators of the account running
# the job" (slurmdbd.conf(5)): what an instructor who grades needs to be.
PrivateData=jobs
EOF
    chmod 600 "$CONF_DIR/slurmdbd.conf"  # slurmdbd refuses a file others can read
    if ! grep -q "course-slurm" /etc/hosts; then
        echo "127.0.0.1 cn1 cn2 # course-slurm" >>/etc/hosts  # so `scontrol show hostnames` resolves
    fi
}

start_munge() {
    if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        return  # someone else's munged is running: use it, leave it alone at stop
    fi
    mkdir -p /run/munge && chown munge:munge /run/munge
    [ -s /etc/munge/munge.key ] || die "no /etc/munge/munge.key (reinstall munge)"
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/course-munged.pid
    cp /run/munge/course-munged.pid "$STATE/munged.pid"
}

start_database() {
    if ! mariadb -e 'select 1' >/dev/null 2>&1; then
        command -v mariadbd >/dev/null || die "mariadb-server not installed"
        install -d -o mysql -g root -m 755 /run/mysqld
        # No systemd here: the server itself, in the background, its pid file in our state.
        /usr/sbin/mariadbd --user=mysql --socket="$DB_SOCKET" --pid-file=/run/mysqld/course-mariadb.pid \
            --skip-networking >"$STATE/log/mariadb.log" 2>&1 &
        for _ in $(seq 1 100); do mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
        mariadb -e 'select 1' >/dev/null 2>&1 || {
            tail -n 20 "$STATE/log/mariadb.log" >&2
            die "MariaDB did not start"
        }
    fi
    mariadb -e "create user if not exists 'slurm'@'localhost' identified by '$DB_PASSWORD';
        grant all on course_slurm_acct.* to 'slurm'@'localhost';"
}

start_slurmdbd() {
    running "$STATE/slurmdbd.pid" || slurmdbd
    for _ in $(seq 1 100); do sacctmgr -n list cluster >/dev/null 2>&1 && return; sleep 0.2; done
    tail -n 20 "$STATE/log/slurmdbd.log" >&2 || true
    die "slurmdbd did not answer within 20 s"
}

add_class() {
    # The class: Unix users with homes, the course's account with each of them in it, and the
    # instructor as its coordinator. Idempotent; sacctmgr says "nothing new" with exit code 1.
    for user in "${LEARNERS[@]}" "$INSTRUCTOR"; do
        id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
    done
    sacctmgr -n list account format=account | grep -qw "$ACCOUNT" ||
        sacctmgr -i add account "$ACCOUNT" cluster=course description="the course" >/dev/null
    for user in "${LEARNERS[@]}" "$INSTRUCTOR"; do
        sacctmgr -n list user "$user" format=user | grep -qw "$user" ||
            sacctmgr -i add user "$user" account="$ACCOUNT" >/dev/null
    done
    sacctmgr -n list user "$INSTRUCTOR" withcoord format=coordinators | grep -qw "$ACCOUNT" ||
        sacctmgr -i add coordinator account="$ACCOUNT" names="$INSTRUCTOR" >/dev/null
}

share() {
    # Let the class's users run a Python that lies under a closed folder (root's home, say): each
    # folder above it may be passed through (o+x), not read. CI's course environment is root's.
    local path=$1 dir
    dir=$(readlink -f "$path")
    while [ "$dir" != / ]; do
        chmod o+x "$dir"
        dir=$(dirname "$dir")
    done
}

running() {  # the daemon whose pid file is $1 is alive
    [ -e "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
    command -v slurmctld >/dev/null || die "slurmctld not installed: apt-get install slurmctld slurmd slurm-client munge"
    [ "$(id -u)" = 0 ] || die "needs root (daemons, /etc/slurm, mknod)"
    if cluster_up; then
        echo "slurm-cluster: already up"; sinfo; return
    fi
    if [ -e "$CONF_DIR/slurm.conf" ] && ! grep -q "$MARKER" "$CONF_DIR/slurm.conf"; then
        die "$CONF_DIR/slurm.conf was not written by this script; refusing to replace it"
    fi
    local fresh=yes  # no controller state kept: this cluster numbers its jobs from 1 again
    [ -d "$STATE/ctld" ] && fresh=no
    mkdir -p "$STATE" "$CONF_DIR"
    write_config
    start_munge
    start_database
    if [ "$fresh" = yes ]; then
        # A stopped cluster's records would answer `sacct -j <id>` for this one's jobs of the
        # same ids (sacct showed the older job): its accounting starts empty too.
        mariadb -e "drop database if exists course_slurm_acct"
    fi
    start_slurmdbd
    # slurmctld registers the cluster itself; adding it first makes the record exist at once
    # (sacctmgr says "already exists" with exit code 1 on a second add).
    sacctmgr -n list cluster format=cluster | grep -qw course || sacctmgr -i add cluster course >/dev/null
    add_class
    running "$STATE/slurmctld.pid" || slurmctld
    for n in "${NODES[@]}"; do
        running "$STATE/slurmd-$n.pid" || slurmd -N "$n"
    done
    for _ in $(seq 1 60); do
        if cluster_up; then
            echo "slurm-cluster: up"; sinfo; return
        fi
        scontrol update nodename=cn[1-2] state=resume >/dev/null 2>&1 || true
        sleep 0.5
    done
    sinfo -N -l || true
    tail -n 20 "$STATE"/log/*.log >&2 || true
    die "nodes did not become idle within 30 s (logs above)"
}

stop_pidfile() {
    local file=$1 pid
    [ -e "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$file"
}

stop() {
    for n in "${NODES[@]}"; do stop_pidfile "$STATE/slurmd-$n.pid"; done
    stop_pidfile "$STATE/slurmctld.pid"
    stop_pidfile "$STATE/slurmdbd.pid"
    stop_pidfile /run/mysqld/course-mariadb.pid  # only when this script started MariaDB
    stop_pidfile "$STATE/munged.pid"  # only when this script started munged
    for f in slurm.conf gres.conf cgroup.conf slurmdbd.conf; do
        if [ -e "$CONF_DIR/$f" ] && grep -q "$MARKER" "$CONF_DIR/$f"; then rm -f "$CONF_DIR/$f"; fi
    done
    # Rewrite in place (not sed -i): /etc/hosts is often a bind mount in containers.
    local hosts
    hosts=$(grep -v '# course-slurm$' /etc/hosts || true)
    printf '%s\n' "$hosts" >/etc/hosts
    rm -rf "$STATE"
    echo "slurm-cluster: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    share) shift; for p in "$@"; do share "$p"; done ;;
    status) if cluster_up; then sinfo; else echo "slurm-cluster: not up"; exit 1; fi ;;
    *) die "usage: $0 start|stop|status|share PATH..." ;;
esac
