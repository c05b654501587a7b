#!/bin/bash
# Threads on a busy machine: old (cda5ed0) vs new binary, -t 1 and -t 2, while the training run holds both cores.
S=/work/shared/models/stories260K.gguf
M=/work/main/tools/train/model/kara-reasoner-1m.gguf
IDS=$(cat /tmp/ids.txt)
for r in 1 2 3; do
 for b in old new; do
  K=/work/main/build/bin/kara; [ $b = old ] && K=/tmp/wt-old/build/bin/kara
  for t in 1 2; do
   s=$( { /usr/bin/time -f "%e" $K run -m $S --temp 0 -n 200 -t $t --kv-method full >/dev/null 2>/tmp/e; } 2>&1; tail -1 /tmp/e)
   g=$($K run -m $M --prompt-ids $IDS --temp 0 -n 400 -t $t --kv-method full 2>&1 >/dev/null | grep -E "prompt:|generation:" | sed 's/.*(\(.*\) tok\/s)/\1/' | tr '\n' ' ')
   echo "run $r $b -t $t stories260K_wall_s $(tail -1 /tmp/e) reasoner_prompt_gen_tok_s $g"
  done
 done
done
