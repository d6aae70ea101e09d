# After the fix (re-applied schedules marked for postprocessing): the warm path end to end on the GPU. The mlp's
# memory taught by 8 trials at 128 rows, then the mlp at 1024 rows: each task's first batch re-applies those
# schedules, its second is the evolution, which takes them from the database (what failed before the fix).
set -x
python3 -m workbench --home /tmp/fx tune --model mlp --target cuda --trials 8 --trials-per-batch 4 2>&1 | tail -3
python3 -m workbench --home /tmp/fx tune --model mlp --input-shape 1024,768 --target cuda --trials 32 \
  --trials-per-batch 8 2>&1 | grep -v '^\s*$' | tail -25
