#!/usr/bin/python3
"""Reference ANN libraries on the table benchmark's random rows (issue 32's isolating experiment).

The rows are `bin/table-bench ann --data random`'s: 1M x 100 uniform [-1, 1] (the initializer's),
queries a stored row plus 10% Gaussian noise (`--query-from rows`), cosine. FAISS 1.7.3 and
hnswlib 0.6 (Debian's python3-faiss, python3-hnswlib; C++ with AVX2) answer one query at a time
on one thread, as `bin/table-bench ann` times the table's scan and index. Prints, per index and
setting, the latency per query, the speed-up over FAISS's own exact scan (and over a stated
scan time, --scan-ms, e.g. the Java table's) and recall@10 against the exact answer.

Usage: bin/ann-reference [--rows N] [--queries Q] [--scan-ms MS] [--only hnsw,ivf,...]
(the script installs Debian's python3-faiss and python3-hnswlib if absent.)
"""
import argparse, time
import numpy as np
import faiss, hnswlib

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=1_000_000)
p.add_argument("--dim", type=int, default=100)
p.add_argument("--queries", type=int, default=200)
p.add_argument("--scan-ms", type=float, default=0.0, help="the table's exact scan, for the 20x line")
KINDS = ("flat", "hnswlib", "ivf", "ivfsq", "faisshnsw", "binary")
p.add_argument("--only", default="flat,hnswlib,ivf,ivfsq,faisshnsw",
               help="of " + ",".join(KINDS) + "; flat, the exact scan, always runs (it gives the"
               " exact answer); binary: recall of 1-bit codes + exact re-score (numpy, not timed)")
p.add_argument("--build-threads", type=int, default=2)
p.add_argument("--hnsw", default="16:100,48:200", help="hnswlib graphs as M:efConstruction,...")
p.add_argument("--ef", default="50,100,200,400,800,1600")
a = p.parse_args()
only = set(a.only.split(","))
if not only <= set(KINDS):
    p.error(f"--only: unknown {','.join(sorted(only - set(KINDS)))}; choose from {','.join(KINDS)}")
rng = np.random.default_rng(7)
x = rng.uniform(-1, 1, (a.rows, a.dim)).astype(np.float32)
faiss.normalize_L2(x)
qi = rng.integers(0, a.rows, a.queries)
q = x[qi] + (0.1 / np.sqrt(a.dim)) * rng.standard_normal((a.queries, a.dim)).astype(np.float32)
q = np.ascontiguousarray(q.astype(np.float32)); faiss.normalize_L2(q)
K = 10

def out(*s):
    print(*s, flush=True)

faiss.omp_set_num_threads(a.build_threads)
flat = faiss.IndexFlatIP(a.dim); flat.add(x)
_, truth = flat.search(q, K)
faiss.omp_set_num_threads(1)

def timed(search):
    for i in range(min(20, a.queries)):
        search(q[i:i + 1])
    ids = np.empty((a.queries, K), dtype=np.int64)
    t = time.perf_counter()
    for i in range(a.queries):
        ids[i] = search(q[i:i + 1])[0][:K]
    ms = (time.perf_counter() - t) * 1e3 / a.queries
    rec = np.mean([len(set(ids[i]) & set(truth[i])) / K for i in range(a.queries)])
    return ms, rec

scan_ms, _ = timed(lambda v: flat.search(v, K)[1])
out(f"rows {a.rows} dim {a.dim} queries {a.queries}; one thread per query")
out(f"| index | setting | ms/query | x FAISS flat | x table scan | recall@10 |")
out(f"| FAISS IndexFlatIP (exact) | | {scan_ms:.2f} | 1.0 | {f'{a.scan_ms / scan_ms:.1f}' if a.scan_ms else '-'} | 1.000 |")
def row(name, setting, ms, rec):
    out(f"| {name} | {setting} | {ms:.3f} | {scan_ms / ms:.1f} | {f'{a.scan_ms / ms:.1f}' if a.scan_ms else '-'} | {rec:.3f} |")

if "hnswlib" in only:
    for m, efc in [tuple(int(v) for v in g.split(":")) for g in a.hnsw.split(",")]:
        t = time.perf_counter()
        h = hnswlib.Index(space="ip", dim=a.dim)
        h.init_index(max_elements=a.rows, M=m, ef_construction=efc, random_seed=1)
        h.set_num_threads(a.build_threads); h.add_items(x); h.set_num_threads(1)
        out(f"hnswlib M {m} efC {efc}: built in {time.perf_counter() - t:.0f} s")
        for ef in [int(v) for v in a.ef.split(",")]:
            h.set_ef(ef)
            ms, rec = timed(lambda v: h.knn_query(v, K)[0])
            row(f"hnswlib M {m} efC {efc}", f"ef {ef}", ms, rec)
        del h
if "ivf" in only or "ivfsq" in only:
    for nlist in (1024, 4096):
        # one coarse quantizer per nlist, trained (k-means) by the first index built on it
        sample = x[rng.choice(a.rows, min(a.rows, 100 * nlist), replace=False)]
        quant = faiss.IndexFlatIP(a.dim)
        if "ivf" in only:
            faiss.omp_set_num_threads(a.build_threads)
            ivf = faiss.IndexIVFFlat(quant, a.dim, nlist, faiss.METRIC_INNER_PRODUCT)
            t = time.perf_counter(); ivf.train(sample); ivf.add(x)
            out(f"IVF-Flat nlist {nlist}: built in {time.perf_counter() - t:.0f} s")
            faiss.omp_set_num_threads(1)
            for nprobe in (8, 16, 32, 64, 128, 256, 512):
                ivf.nprobe = nprobe
                ms, rec = timed(lambda v: ivf.search(v, K)[1])
                row(f"IVF-Flat nlist {nlist}", f"nprobe {nprobe}", ms, rec)
            del ivf
        if "ivfsq" in only:
            faiss.omp_set_num_threads(a.build_threads)
            sq = faiss.IndexIVFScalarQuantizer(quant, a.dim, nlist, faiss.ScalarQuantizer.QT_4bit, faiss.METRIC_INNER_PRODUCT)
            t = time.perf_counter(); sq.train(sample); sq.add(x)
            out(f"IVF-SQ4 nlist {nlist}: built in {time.perf_counter() - t:.0f} s")
            ref = faiss.IndexRefineFlat(sq, faiss.swig_ptr(x))
            faiss.omp_set_num_threads(1)
            for nprobe in (32, 128, 512):
                for kf in (10, 50):
                    sq.nprobe = nprobe
                    ref.k_factor = kf  # FAISS 1.7.3 has no per-search parameters for it
                    ms, rec = timed(lambda v: ref.search(v, K)[1])
                    row(f"IVF-SQ4 nlist {nlist} + exact re-score", f"nprobe {nprobe}, {kf * K} candidates", ms, rec)
            del sq, ref
        del quant, sample
if "faisshnsw" in only:
    faiss.omp_set_num_threads(a.build_threads)
    hi = faiss.IndexHNSWFlat(a.dim, 32, faiss.METRIC_INNER_PRODUCT); hi.hnsw.efConstruction = 200
    t = time.perf_counter(); hi.add(x)
    out(f"FAISS HNSW M 32 efC 200: built in {time.perf_counter() - t:.0f} s")
    faiss.omp_set_num_threads(1)
    for ef in (100, 400, 1600):
        hi.hnsw.efSearch = ef
        ms, rec = timed(lambda v: hi.search(v, K)[1])
        row("FAISS HNSW M 32 efC 200", f"efSearch {ef}", ms, rec)
if "binary" in only:
    # Recall only (not timed): 1-bit codes (signs of random projections), candidates by Hamming
    # distance, re-scored exactly; how many candidates a quantized first pass must hand over.
    exact_scores = q @ x.T
    for bits in (128, 256):
        proj = rng.standard_normal((a.dim, bits)).astype(np.float32)
        one = np.float32(1)
        cx = np.where(x @ proj > 0, one, -one)
        cq = np.where(q @ proj > 0, one, -one)
        agree = cq @ cx.T  # bits - 2 * Hamming distance
        for c in (1000, 5000, 10000, 20000):
            if c >= a.rows:
                continue
            cand = np.argpartition(-agree, c, axis=1)[:, :c]
            hits = 0
            for i in range(a.queries):
                top = cand[i][np.argsort(-exact_scores[i, cand[i]])[:K]]
                hits += len(set(top) & set(truth[i]))
            out(f"| 1-bit codes, {bits} bits + exact re-score | {c} candidates | (not timed) | | | {hits / (a.queries * K):.3f} |")
