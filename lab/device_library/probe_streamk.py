"""Probe of TF32 stream-K (``sm90_xmma_gemm_*tf32*_segment_k_on``, after a Memset) against the bit captures.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/probe_streamk.py

Hypothesis: the tiles' K iterations (K-tile from the kernel name) are dealt to the launch's CTAs in equal
consecutive shares; a tile's segments are its intersections with the CTA shares, each a TF32 chain from +0,
summed in K order.  Tried with two tile orders and two share rules on 8 x 8 sampled outputs per call.
Finding (2026-11-25, 29 calls): it reproduces all 6 calls whose CTAs are twice the tiles (two equal segments
per tile) and 2 with more tiles than CTAs, none with three or more segments per tile: the segment map or the
fix-up order is something else there.
Identified since (2026-11-26, ``probe_tf32.py``, module ``tcnumerics.library.streamk``): not equal shares of
all tiles but data-parallel tiles plus the last r = T mod C (T > C; else all T) tiles of a banded serpentine
schedule shared by s = C // r CTAs, segments of ipt // s iterations (remainder to the last ones), partials
summed by a pairs-from-the-last tree: 30 of 30 captured calls bit-exact on all 16 x 16 samples.
"""
import re, itertools, warnings, numpy as np
warnings.filterwarnings("ignore")
from replay_survey import load, operands
from fit_table import call_of
from tcnumerics.library.launches import measured_launch
from tcnumerics.library.structure import Structure, run
from tcnumerics.library.selection import WGMMA
import tcnumerics as tc
caps=['vectors/library/hopper_op_survey_h100.npz','vectors/library/hopper_op_ksample_h100.npz','vectors/library/hopper_op_ksample2_h100.npz','vectors/library/hopper_op_holdout4_h100.npz']
base=Structure("TF32 streamK", instruction=WGMMA["tf32"], input_rounding="rne")
def segments(t, ipt, total, ctas, rule):
    if rule=='ceil':
        ipc=-(-total//ctas); bounds=[min(total,c*ipc) for c in range(ctas+1)]
    else:  # even split, remainder to the first CTAs
        q,r=divmod(total,ctas); bounds=[0]
        for c in range(ctas): bounds.append(bounds[-1]+q+(1 if c<r else 0))
    lo,hi=t*ipt,(t+1)*ipt
    cuts=[b for b in bounds if lo<b<hi]
    pts=[lo]+cuts+[hi]
    return [b-a for a,b in zip(pts,pts[1:])]
results={}
for cap in caps:
    idx,data=load(cap)
    for r in idx['records']:
        ks=r.get('kernels') or []
        if not any('segment_k_on' in k for k in ks): continue
        c=call_of(r); L=measured_launch(c)
        m=re.search(r'tilesize(\d+)x(\d+)x(\d+)',L.main); TM,TN,TK=map(int,m.groups())
        ops=operands(r,data); rows,cols=ops['rows'][:8],ops['cols'][:8]
        A,B,E=ops['A'][0][:8],ops['B'][0][:,:8],ops['expected'][0][:8,:8]
        ipt=-(-c.K//TK); tm_n=-(-c.N//TM); tn_n=-(-c.M//TN); tiles=tm_n*tn_n; total=tiles*ipt
        ok=[]
        for order,rule in itertools.product(('m_fast','n_fast'),('ceil','even')):
            bad=0
            for i in range(len(rows)):
                for j in range(len(cols)):
                    tmi,tni=cols[j]//TM, rows[i]//TN
                    t=tmi+tni*tm_n if order=='m_fast' else tni+tmi*tn_n
                    seg=segments(t,ipt,total,L.ctas,rule)
                    lens=[s*TK for s in seg]; lens[-1]-= ipt*TK-c.K
                    s=base.with_(split_k=tuple(lens) if len(lens)>1 else None)
                    got=run(s,A[i:i+1],B[:,j:j+1],out_format='fp32')
                    bad+=int(tc.get_format('fp32').bits_of(np.asarray(got))[0,0]!=E[i,j])
                if bad>3: break
            if bad==0: ok.append((order,rule))
        print(cap[-22:-4],r['id'],c.M,c.N,c.K,'tiles',tiles,'ctas',L.ctas,'ipt',ipt,'ok',ok,flush=True)
