#!/bin/bash
# quiet-machine check of the per-call thread choice on a 0.6B-shape model: old (cda5ed0) vs new, alternated
M=/tmp/q06.gguf
/work/main/build/bin/kara bench --membw -t 2 2>&1 | tail -1
for r in 1 2; do
 for b in old new; do
  K=/work/main/build/bin/kara; [ $b = old ] && K=/tmp/wt-old/build/bin/kara
  echo "== $b rep $r"; $K bench -m $M -t 2 -p 512 -n 128 -r 2 2>&1 | grep -o "\"test\":\"[a-z0-9]*\"\|\"tok_s_median\":[0-9.]*" | tr '\n' ' '; echo
 done
done
