"""Per-query medians of the host path against RAPIDS' own manager, over the runs in which both ran the same plan.

A query "ran the same plan" in a run when the two managers' shuffle bytes written are within 20% of each other:
adaptive execution sometimes picks another join for q08 or q09 (370 against 3,846 MiB written for q08), under
either manager, and such a pair compares two plans rather than two shuffles.
Usage: python3 medians.py  (from this folder)
"""
import json
import statistics as st

GROUPS = {
    "8 codec threads": ["ab1-t8", "ab2-t8", "three-1", "three-2"],
    "no codec threads": ["ab1-t0", "ab2-t0"],
}


def load(folder):
    j = json.load(open(folder + "/tpch.json"))
    out = {}
    for r in j["runs"]:
        if not r["warmup"]:
            out.setdefault(r["query"], {})[r["manager"]] = (r["wallMillis"], r["metrics"]["shuffleBytesWritten"])
    return out, set(j["shuffleHeavyQueries"])


for group, folders in GROUPS.items():
    runs = [load(f) for f in folders]
    heavy = runs[0][1]
    print(f"== {group}: {', '.join(folders)}")
    print("query  same-plan runs  rapids-default ms  rapids-slipstream-tcp ms  ratio of medians  per-run ratios")
    total_d = total_s = 0
    for q in sorted(runs[0][0]):
        pairs = []
        for r, _ in runs:
            (a, aw), (b, bw) = r[q]["rapids-default"], r[q]["rapids-slipstream-tcp"]
            if max(aw, bw) <= 1.2 * min(aw, bw) + (1 << 20):
                pairs.append((a, b))
        if not pairs:
            print(f"{q}    0 of {len(runs)}")
            continue
        md, ms = st.median(p[0] for p in pairs), st.median(p[1] for p in pairs)
        if q in heavy:
            total_d += md
            total_s += ms
        ratios = " ".join(f"{b / a:.2f}" for a, b in pairs)
        print(f"{q}    {len(pairs)} of {len(runs)}  {md:9.0f}  {ms:9.0f}  {ms / md:5.2f}  {ratios}")
    print(f"shuffle-heavy queries with a same-plan run: {total_d:.0f} against {total_s:.0f} ms, {total_s / total_d:.3f}\n")
