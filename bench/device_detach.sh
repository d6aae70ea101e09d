#!/usr/bin/env bash
# On the lent GPU machine, after `source .device/rest/unpack.sh`: start a long bench command detached from the
# device call, from a private copy of the checkout, so that the next call's re-copy of the checkout cannot pull
# modules from under it (a run importing while the tool re-copied failed with ModuleNotFoundError, 2026-12-02).
#   bash bench/device_detach.sh NAME 'python3 -m bench.slice_study tune ...'   # returns at once
#   tail /tmp/dev/NAME.log; cat /tmp/dev/NAME.rc                                # later calls: its log, exit code
set -eu
NAME=$1; shift
CODE=/tmp/dev/code-$NAME
mkdir -p /tmp/dev && rm -rf "$CODE" && mkdir -p "$CODE"
cp -r workbench sample_models bench widgets tests pyproject.toml "$CODE"/
SITE=${WB_SITE:-/opt/workbench-site}/site
cd "$CODE"
PYTHONPATH="$SITE:$CODE" PYTHONUNBUFFERED=1 setsid nohup bash -c "$*; echo \$? > /tmp/dev/$NAME.rc" \
  > "/tmp/dev/$NAME.log" 2>&1 < /dev/null &
echo "started $NAME (pid $!) in $CODE; log /tmp/dev/$NAME.log"
