#!/usr/bin/env python3
"""gemma.c against llama.cpp on the same GGUF files, same thread counts, in one run.

For every (model, threads): R repetitions, each running, one after the other,
  gemma.c      `gemma bench -m M --threads T --prompt-tokens P --gen-tokens G --json`
  llama.cpp    bench/peer_llamacpp.py through llama-cpp-python, weights read into memory (mmap 0)
  llama.cpp    the same with mmap'd weights (mmap 1)          (its best load mode counts)
  (with --peer-flash-attn 0,1 each load mode also with llama.cpp's flash attention: its best mode counts)
as separate processes. Before each run the script waits until the machine is idle (other processes
below --idle-cores of CPU over 1 s); each run is checked afterwards: CPU time used by processes other
than the measured one, from /proc/stat minus the child's own rusage, divided by the run's wall time,
must stay below --idle-cores, else the run is "disturbed" and repeated (up to --retries times; a
run still disturbed then is kept and counted). Medians over the repetitions, then ratios
gemma.c / llama.cpp (best load mode, per metric).

Also: the read-bandwidth ceiling (build/bench_membw, 1 and 2 threads) and decode efficiency =
bytes_read_per_token x decode tok/s / ceiling (the ceiling measured at the start, and "adjacent": measured
again just before each repetition of gemma.c, the median of each repetition's own ratio, as the host's
bandwidth drifts within a run); time to first token of a 16-token prompt including
model load, warm page cache (gemma.c: first_token_ms of `gemma bench --prompt-tokens 16 --gen-tokens 0`,
i.e. load + session + prefill + arg-max, and the whole process's wall time; with --weight-cache DIR also
with the packed weights mapped from DIR, written by one run before; llama.cpp: Llama() + eval + argmax).
--busy-cores N keeps N other processes (a busy loop each, ordinary priority) running through every
measurement, as when another program holds a core: the idle and disturbance thresholds rise by N and the
bandwidth ceiling is not measured.
--ttft-only measures only the time to first token; --fast also runs gemma.c with --precision fast, and
--full-logits with every logit exact at each step (gemma bench's greedy decode otherwise computes exactly only
the largest: the screened vocabulary product, docs/DESIGN.md).

The peer: llama-cpp-python from PyPI, built from source (--build-peer DIR builds it into a venv:
CPU-only, AVX-512/VNNI/BF16/AVX-VNNI on, AMX off because its AMX path crashes on this machine, see
docs/BENCHMARKS.md). Usage:
  python3 bench/compare_llamacpp.py --gemma build/gemma --peer-python /work/peer/venv/bin/python \\
      --model /work/models/gemma-3-270m-q4_k_m.gguf --model /work/models/random-1b-q8_0.gguf \\
      --model /work/models/random-1b-bf16.gguf --threads 1,2 --reps 5 --out /tmp/compare.md
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
HERE = os.path.dirname(os.path.abspath(__file__))

# ggml's per-ISA switches, each turned on only when this CPU reports the flag (a build for another CPU
# dies with SIGILL: AVX-VNNI is Intel-only, for one). AMX stays off: its path crashes (docs/BENCHMARKS.md).
PEER_ISA_FLAGS = [("AVX", "avx"), ("AVX2", "avx2"), ("FMA", "fma"), ("F16C", "f16c"), ("BMI2", "bmi2"),
                  ("AVX_VNNI", "avx_vnni"), ("AVX512", "avx512f"), ("AVX512_VBMI", "avx512vbmi"),
                  ("AVX512_VNNI", "avx512_vnni"), ("AVX512_BF16", "avx512_bf16")]


def peer_cmake_args():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    isa = " ".join(f"-DGGML_{name}={'ON' if flag in flags else 'OFF'}" for name, flag in PEER_ISA_FLAGS)
    return ("-DGGML_NATIVE=OFF " + isa + " -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "
            "-DGGML_OPENMP=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF")


def cpu_busy_seconds():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / HZ


def wait_idle(limit, timeout):
    """Wait until other load < limit cores over 1 s; returns the last measured load."""
    t_end = time.time() + timeout
    while True:
        b0, t0 = cpu_busy_seconds(), time.time()
        time.sleep(1.0)
        load = (cpu_busy_seconds() - b0) / (time.time() - t0)
        if load < limit or time.time() > t_end:
            return load


def run_measured(cmd, env=None):
    """Run cmd; returns (stdout, wall seconds, other-process cores during the run)."""
    b0, t0 = cpu_busy_seconds(), time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.time() - t0
    other = (cpu_busy_seconds() - b0 - (ru.ru_utime + ru.ru_stime)) / wall
    if status != 0:
        raise RuntimeError(f"{cmd[0]} exited with status {status}: {' '.join(cmd)}")
    return out.decode(), wall, max(0.0, other)


class Runner:
    def __init__(self, args):
        self.a = args
        self.limit = args.idle_cores + args.busy_cores  # the busy loops count as other processes
        self.disturbed_kept = 0
        self.retried = 0

    def measure(self, cmd, env=None):
        for attempt in range(self.a.retries + 1):
            wait_idle(self.limit, self.a.idle_timeout)
            out, wall, other = run_measured(cmd, env)
            if other < self.limit:
                break
            self.retried += 1
            print(f"  disturbed ({other:.2f} other cores), retry {attempt + 1}: {' '.join(cmd[-8:])}", file=sys.stderr)
        else:
            self.disturbed_kept += 1
        res = json.loads(out.strip().splitlines()[-1])
        res["_wall_s"], res["_other_cores"] = wall, other
        return res


def membw_best(a, t):
    """The read-bandwidth ceiling now: bench_membw's best of 7 passes over 1 GiB on t threads (GB/s)."""
    wait_idle(a.idle_cores, a.idle_timeout)
    out, _, _ = run_measured([a.membw, "--threads", str(t), "--mib", "1024", "--passes", "7", "--json"])
    return json.loads(out)[0]["best_gb_s"]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def peer_key(mode):
    """(mmap, flash_attn) -> the prefix of its row keys: "peer0" / "peer1" as before flash attention was a
    choice, "peer0fa" / "peer1fa" """
    return f"peer{mode[0]}" + ("fa" if mode[1] else "")


def peer_label(mode):
    return ("mmap" if mode[0] else "read") + (" + FA" if mode[1] else "")


def peer_cmd(peer_py, model, t, mode, extra):
    return [peer_py, os.path.join(HERE, "peer_llamacpp.py"), "-m", model, "-t", str(t), "--mmap", str(mode[0]),
            "--flash-attn", str(mode[1])] + extra


def throughput_table(rows, modes, bw, threads):
    names = " / ".join(peer_label(m) for m in modes)
    lines = []
    lines.append(f"| model | threads | decode tok/s gemma.c | decode llama.cpp ({names}) | decode ratio | "
                 f"prefill tok/s gemma.c | prefill llama.cpp ({names}) | prefill ratio | bytes/token | "
                 "decode GB/s | % of read BW | % of adjacent read BW |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        pm = " / ".join(f"{r.get(f'{peer_key(m)}_tg', float('nan')):.1f}" for m in modes)
        pp = " / ".join(f"{r.get(f'{peer_key(m)}_pp', float('nan')):.0f}" for m in modes)
        gbs = r["ours_bytes"] * r["ours_tg"] / 1e9
        eff = f"{100 * gbs / bw[r['threads']]['median']:.0f} %" if r["threads"] in bw else "-"
        adj = f"{100 * r['ours_eff_adj']:.0f} %" if r.get("ours_eff_adj") else "-"
        lines.append(
            f"| {r['model']} | {r['threads']} | {r['ours_tg']:.1f} | {pm} | {r['ours_tg'] / r['peer_tg']:.2f}x | "
            f"{r['ours_pp']:.0f} | {pp} | {r['ours_pp'] / r['peer_pp']:.2f}x | {r['ours_bytes'] / 1e6:.0f} MB | "
            f"{gbs:.1f} | {eff} | {adj} |")
    lines.append("")
    lines.append(("Read bandwidth ceiling (bench_membw, 1 GiB, best of 7 passes, 3 runs): " + "; ".join(
        f"{t} thread{'s' if t > 1 else ''}: median {bw[t]['median']:.1f} GB/s (runs {', '.join(f'{v:.1f}' for v in bw[t]['all'])})"
        for t in threads) + "; adjacent: the same measured just before each repetition of gemma.c, each "
        "repetition's decode GB/s over its own, median (ceilings " + "; ".join(
            f"{r['model']} t={r['threads']} {r['adjacent_all']}" for r in rows if r.get("adjacent_all")) + ")"
        if bw else "Read bandwidth ceiling: not measured (busy cores)") + ". Kernels: " + (rows[0]["kernels"] if rows else "") + ". gemma.c's decode logits: " +
        ("; ".join(f"{r['model']} t={r['threads']} {r['logits']}" for r in rows)) + ".")
    lines.append("")
    lines.append("Per-repetition values (tok/s), prefill | decode:")
    lines.append("")
    for r in rows:
        s = f"- {r['model']} t={r['threads']}: gemma.c {r['ours_pp_all']} | {r['ours_tg_all']}"
        for m in modes:
            k = peer_key(m)
            s += f"; llama.cpp mmap={m[0]}{' fa=1' if m[1] else ''} {r[f'{k}_pp_all']} | {r[f'{k}_tg_all']}"
        lines.append(s)
    lines.append("")
    return lines


# Extra gemma.c runs in every repetition: key, the option that asks for it, gemma's flags, what the table says.
VARIANTS = {
    "fast": ("fast", ["--precision", "fast"],
             "gemma.c with `--precision fast` (activations rounded as llama.cpp rounds them)"),
    "full": ("full_logits", ["--full-logits"], "gemma.c with `--full-logits` (every logit computed exactly at each "
                                               "decode step, as before the screened vocabulary product)"),
}


def variant_table(rows, key):
    lines = [f"{VARIANTS[key][2]}, same runs, against llama.cpp's better load mode:", "",
             f"| model | threads | decode tok/s {key} | decode ratio | prefill tok/s {key} | prefill ratio |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r[key + '_tg']:.1f} | {r[key + '_tg'] / r['peer_tg']:.2f}x | "
                     f"{r[key + '_pp']:.0f} | {r[key + '_pp'] / r['peer_pp']:.2f}x |")
    lines += ["", f"Per-repetition values, {key} (tok/s), prefill | decode:", ""]
    for r in rows:
        lines.append(f"- {r['model']} t={r['threads']}: {r[key + '_pp_all']} | {r[key + '_tg_all']}")
    lines.append("")
    return lines


def build_peer(dest):
    venv = os.path.join(dest, "venv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    env = dict(os.environ, CMAKE_ARGS=peer_cmake_args(), CMAKE_BUILD_PARALLEL_LEVEL=str(NCPU))
    pip = [py, "-m", "pip", "install", "--no-cache-dir"]
    subprocess.check_call(pip + ["numpy", "typing-extensions", "diskcache", "jinja2"])
    # always rebuilt: a wheel left from another machine may use instructions this CPU lacks
    subprocess.check_call(pip + ["--no-binary", "llama-cpp-python", "--force-reinstall", "--no-deps",
                                 "llama-cpp-python==0.3.36"], env=env)
    return py


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gemma", default="build/gemma")
    ap.add_argument("--membw", default="build/bench_membw")
    ap.add_argument("--peer-python", default=None, help="python of a venv with llama-cpp-python")
    ap.add_argument("--build-peer", default=None, metavar="DIR", help="build llama-cpp-python into DIR/venv first")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--ttft-tokens", type=int, default=16)
    ap.add_argument("--idle-cores", type=float, default=0.15)
    ap.add_argument("--idle-timeout", type=float, default=120)
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--busy-cores", type=int, default=0,
                    help="keep this many busy-loop processes running during the measurements (a loaded machine)")
    ap.add_argument("--peer-mmap", default="0,1", help="llama.cpp load modes to run (0 = read, 1 = mmap)")
    ap.add_argument("--peer-flash-attn", default="0",
                    help="llama.cpp flash attention settings to run with each load mode (0 = off, llama-cpp-python's "
                         "default; 1 = on); the time to first token uses the last")
    ap.add_argument("--out", default=None, help="also write the markdown report here")
    ap.add_argument("--weight-cache", default=None, metavar="DIR", help="also time the first token with --weight-cache DIR")
    ap.add_argument("--ttft-only", action="store_true", help="only the time to first token")
    ap.add_argument("--fast", action="store_true",
                    help="also run gemma.c with --precision fast (llama.cpp's activation rounding) in every repetition")
    ap.add_argument("--full-logits", action="store_true",
                    help="also run gemma.c with --full-logits (every logit exact each step) in every repetition")
    a = ap.parse_args()
    if a.busy_cores < 0 or a.busy_cores >= NCPU:
        ap.error(f"--busy-cores {a.busy_cores}: wants 0 to {NCPU - 1} (this machine has {NCPU} CPUs)")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy_cores)]
    try:
        return compare(a, ap)
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def compare(a, ap):
    variants = [k for k, v in VARIANTS.items() if getattr(a, v[0])]
    peer_py = build_peer(a.build_peer) if a.build_peer else a.peer_python
    threads = [int(t) for t in a.threads.split(",")]
    fas = [f.strip() for f in a.peer_flash_attn.split(",")]
    if not fas or any(f not in ("0", "1") for f in fas):
        ap.error(f"--peer-flash-attn {a.peer_flash_attn}: wants 0, 1 or 0,1")
    fas = [int(f) for f in fas]
    modes = [(int(m), f) for f in fas for m in a.peer_mmap.split(",")] if peer_py else []
    ttft_mode = (1 if any(m[0] for m in modes) else modes[0][0], fas[-1]) if modes else None
    R = Runner(a)
    t_start = time.strftime("%Y-%m-%d %H:%M:%S")
    load_before = os.getloadavg()

    # bandwidth ceiling
    bw = {}
    for t in ([] if a.ttft_only or a.busy_cores else threads):
        vals = [membw_best(a, t) for _ in range(3)]
        bw[t] = {"median": med(vals), "max": max(vals), "all": vals}
        print(f"read bandwidth {t} thread(s): {vals} GB/s", file=sys.stderr)

    rows = []
    for model in a.model:
        name = os.path.basename(model)
        for t in threads:
            ours, extra, peer = [], {k: [] for k in variants}, {m: [] for m in modes}
            adjacent = []  # the read-bandwidth ceiling measured just before each repetition of gemma.c
            for rep in range(0 if a.ttft_only else a.reps):
                cmd = [a.gemma, "bench", "-m", model, "--threads", str(t), "--prompt-tokens", str(a.prompt_tokens),
                       "--gen-tokens", str(a.gen_tokens), "--json"]
                if t in bw:
                    adjacent.append(membw_best(a, t))
                ours.append(R.measure(cmd))
                for k in variants:
                    extra[k].append(R.measure(cmd + VARIANTS[k][1]))
                for m in modes:
                    peer[m].append(R.measure(peer_cmd(peer_py, model, t, m,
                                                      ["-p", str(a.prompt_tokens), "-n", str(a.gen_tokens)])))
                print(f"{name} t={t} rep {rep + 1}: ours pp {ours[-1]['prefill_tok_s']:.1f} tg "
                      f"{ours[-1]['decode_tok_s']:.2f}" +
                      "".join(f" | {k} pp {extra[k][-1]['prefill_tok_s']:.1f} tg {extra[k][-1]['decode_tok_s']:.2f}"
                              for k in variants) +
                      "".join(
                          f" | {peer_key(m)} pp {peer[m][-1]['prefill_tok_s']:.1f} "
                          f"tg {peer[m][-1]['decode_tok_s']:.2f}" for m in modes), file=sys.stderr)
            # time to first token, 16-token prompt, load included (page cache warm from the runs above)
            ttft_ours, ttft_wall, ttft_peer, ttft_cache, ttft_cache_wall = [], [], [], [], []
            first = [a.gemma, "bench", "-m", model, "--threads", str(t), "--prompt-tokens", str(a.ttft_tokens),
                     "--gen-tokens", "0", "--json"]
            cached = first + ["--weight-cache", a.weight_cache] if a.weight_cache else None
            if cached:  # the first run writes the cache, the second reads it into the page cache
                for _ in range(2):
                    subprocess.run(cached, stdout=subprocess.DEVNULL, check=True)
            for rep in range(a.reps):
                r = R.measure(first)
                ttft_ours.append(r.get("first_token_ms", r["load_ms"] + r["ttft_ms"]))
                ttft_wall.append(r["_wall_s"] * 1000)
                if cached:
                    r = R.measure(cached)
                    if r.get("weight_cache") != "mapped":
                        sys.exit(f"--weight-cache {a.weight_cache}: the cache was not mapped ({r.get('weight_cache')})")
                    ttft_cache.append(r["first_token_ms"])
                    ttft_cache_wall.append(r["_wall_s"] * 1000)
                if peer_py:
                    p = R.measure(peer_cmd(peer_py, model, t, ttft_mode,
                                           ["-p", "8", "-n", "0", "--ttft-tokens", str(a.ttft_tokens)]))
                    ttft_peer.append(p["ttft_ms"])
            row = {
                "model": name, "threads": t,
                "ours_ttft": med(ttft_ours), "ours_ttft_wall": med(ttft_wall), "peer_ttft": med(ttft_peer),
                "ours_ttft_cache": med(ttft_cache), "ours_ttft_cache_wall": med(ttft_cache_wall),
                "ttft_all": [round(v) for v in ttft_ours], "ttft_cache_all": [round(v) for v in ttft_cache],
                "ttft_peer_all": [round(v) for v in ttft_peer],
            }
            rows.append(row)
            if a.ttft_only:
                continue
            row.update({
                "ours_pp": med([r["prefill_tok_s"] for r in ours]), "ours_tg": med([r["decode_tok_s"] for r in ours]),
                "ours_bytes": med([r.get("bytes_read_per_token") for r in ours]),
                "ours_rss": med([r["peak_rss_mb"] for r in ours]),
                "kernels": ours[0].get("kernels", ""),
                "logits": (f"top {ours[0]['logits_top']} exact, {med([r['screen_exact_rows_per_step'] for r in ours]):.0f} "
                           "rows per step recomputed exactly" if ours[0].get("screened_steps") else "all exact"),
                # each repetition's decode GB/s over the ceiling measured just before it: the host's hour drifts
                "ours_eff_adj": med([r["bytes_read_per_token"] * r["decode_tok_s"] / 1e9 / c
                                     for r, c in zip(ours, adjacent)]) if adjacent else None,
                "adjacent_all": [round(c, 1) for c in adjacent],
                "ours_pp_all": [round(r["prefill_tok_s"], 1) for r in ours],
                "ours_tg_all": [round(r["decode_tok_s"], 2) for r in ours],
            })
            for k in variants:
                row.update({f"{k}_pp": med([r["prefill_tok_s"] for r in extra[k]]),
                            f"{k}_tg": med([r["decode_tok_s"] for r in extra[k]]),
                            f"{k}_pp_all": [round(r["prefill_tok_s"], 1) for r in extra[k]],
                            f"{k}_tg_all": [round(r["decode_tok_s"], 2) for r in extra[k]]})
            for m in modes:
                k = peer_key(m)
                row[f"{k}_pp"] = med([r["prefill_tok_s"] for r in peer[m]])
                row[f"{k}_tg"] = med([r["decode_tok_s"] for r in peer[m]])
                row[f"{k}_pp_all"] = [round(r["prefill_tok_s"], 1) for r in peer[m]]
                row[f"{k}_tg_all"] = [round(r["decode_tok_s"], 2) for r in peer[m]]
            row["peer_pp"] = max((row[f"{peer_key(m)}_pp"] for m in modes), default=float("nan"))
            row["peer_tg"] = max((row[f"{peer_key(m)}_tg"] for m in modes), default=float("nan"))

    load_after = os.getloadavg()
    lines = []
    lines.append(f"Run {t_start} .. {time.strftime('%H:%M:%S')}; load average before {load_before[0]:.2f} / after "
                 f"{load_after[0]:.2f}; {R.retried} disturbed runs repeated, {R.disturbed_kept} kept disturbed "
                 f"(idle threshold {a.idle_cores} cores" +
                 (f" over the {a.busy_cores} busy-loop process{'es' if a.busy_cores > 1 else ''} kept running "
                  "through every measurement" if a.busy_cores else "") + f"); medians of {a.reps} repetitions" +
                 ("." if a.ttft_only else f"; prompt {a.prompt_tokens}, decode {a.gen_tokens} tokens."))
    lines.append("")
    if not a.ttft_only:
        lines += throughput_table(rows, modes, bw, threads)
        for k in variants:
            lines += variant_table(rows, k)
    lines.append(f"Time to first token, {a.ttft_tokens}-token prompt, model load included, warm page cache (ms, "
                 "medians; in parentheses the whole process's wall time):")
    lines.append("")
    lines.append("| model | threads | gemma.c | gemma.c --weight-cache (mapped) | llama.cpp "
                 f"({peer_label(ttft_mode) if ttft_mode else '-'}) |")
    lines.append("|---|---:|---:|---:|---:|")
    for r in rows:
        cache = (f"{r['ours_ttft_cache']:.0f} ({r['ours_ttft_cache_wall']:.0f})" if r["ttft_cache_all"] else "-")
        lines.append(f"| {r['model']} | {r['threads']} | {r['ours_ttft']:.0f} ({r['ours_ttft_wall']:.0f}) | {cache} | "
                     f"{r['peer_ttft']:.0f} |")
    lines.append("")
    lines.append("Per-repetition time to first token (ms), gemma.c | --weight-cache | llama.cpp:")
    lines.append("")
    for r in rows:
        lines.append(f"- {r['model']} t={r['threads']}: {r['ttft_all']} | {r['ttft_cache_all']} | {r['ttft_peer_all']}")
    report = "\n".join(lines)
    print(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
