#!/usr/bin/env bash
# Start a real single-node Slurm on this machine (Debian's slurm-wlm 22.05 + munge), for the Slurm tests and for
# trying `executor: {kind: slurm}` recipes locally. Needs root; the daemons are started by hand (no systemd).
# Idempotent: a second call finds the cluster up and returns. Prints "slurm up" when `sinfo` answers.
set -euo pipefail

if sinfo -h >/dev/null 2>&1 && [ "$(sinfo -h -o %T 2>/dev/null | head -1)" = "idle" ]; then
  echo "slurm up (already running)"; exit 0
fi
if ! command -v slurmctld >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

CPUS=$(nproc)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
# datatrove asks for 2 GB per CPU by default: RealMemory must cover CPUs x 2 GB.
if [ "$MEM_MB" -lt $(( CPUS * 2048 )) ]; then MEM_MB=$(( CPUS * 2048 )); fi

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge /etc/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=mathmix
SlurmctldHost=localhost
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmUser=root
SlurmdUser=root
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MpiDefault=none
NodeName=localhost CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
rm -f /etc/slurm/cgroup.conf  # no cgroups here: proctrack/linuxproc and task/none need none

if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge 2>/dev/null || true
chmod 700 /etc/munge /var/lib/munge /var/log/munge; chmod 400 /etc/munge/munge.key; chmod 755 /run/munge
pgrep -x munged >/dev/null || su -s /bin/sh munge -c "munged" 2>/dev/null || munged --force
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd -N localhost

for _ in $(seq 1 60); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1 || true)
  if [ "$state" = "idle" ]; then echo "slurm up"; exit 0; fi
  if [ "$state" = "down" ] || [ "$state" = "drained" ]; then scontrol update nodename=localhost state=resume 2>/dev/null || true; fi
  sleep 1
done
echo "slurm did not come up; see /var/log/slurm/" >&2
tail -n 5 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
