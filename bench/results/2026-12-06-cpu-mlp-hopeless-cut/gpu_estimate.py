import json,gzip,glob,math
tot_saved=0; tot_span=0; runs=0; cut_n=0; cand=0
per=[]
for f in sorted(glob.glob('bench/results/**/*.jsonl*',recursive=True)):
    op=gzip.open if f.endswith('.gz') else open
    try: evs=[json.loads(l) for l in op(f,'rt')]
    except Exception: continue
    hw=[e for e in evs if e['kind']=='hardware']
    if not hw or hw[0].get('target')!='cuda': continue
    b=[e for e in evs if e['kind']=='batch' and e.get('latest_us')]
    if not b: continue
    saved=0; n=0
    for e in b:
        best=math.inf
        for us in e['latest_us']:
            cand+=1
            if us is None: continue
            s=us/1e6
            if math.isfinite(best) and s>max(10*best,0.05):
                saved+=3*s; n+=1   # warm-up + 3 calls -> 1 call
            else:
                best=min(best,s)
    span=b[-1]['t']-b[0]['t']
    tot_saved+=saved; cut_n+=n; runs+=1
    per.append((f.split('/')[2][:45], len(b), n, round(saved,1), round(span)))
for p in per: print(p)
print('runs',runs,'candidates',cand,'cut',cut_n,'saved_s',round(tot_saved))
