#!/usr/bin/env python3
"""stampede beside its peers on one M/M/c, events per second on one core.

    python3 benches/peers/run.py [--stampede PATH] [--quick]

Installs what it needs (SimPy and Ciw from PyPI; NeXosim from crates.io, compiled in
this folder's own Cargo project), runs the same queue in each — λ = 160/s, μ = 100/s,
c = 2 (ρ = 0.8), 1,000 simulated seconds after a 50 s warm-up, exponential times —
checks that every mean wait in queue agrees with Erlang C, and prints one table: events
per second on one core and stampede's speed as a multiple of each peer's.

stampede's figure is its replicas' own compute time (the manifest's events_per_s, one
worker thread), the peers' their in-process wall time over all their replicas; an event
is an arrival or a service completion everywhere. `--quick` runs a tenth of the horizon.
Exit 1 if a mean wait disagrees with Erlang C.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAMBDA, MU, SERVERS, WARMUP = 160.0, 100.0, 2, 50.0


def erlang_c_wait(servers, lam, mu):
    a = lam / mu
    terms = sum(a**k / math.factorial(k) for k in range(servers))
    tail = a**servers / math.factorial(servers) / (1 - a / servers)
    return tail / (terms + tail) / (servers * mu - lam)


def sh(command, **kwargs):
    return subprocess.run(command, check=True, text=True, **kwargs)


def install():
    print("peers: installing SimPy and Ciw (pip) and building the Rust peers (cargo, release)", file=sys.stderr)
    sh([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "simpy>=4", "ciw>=3"])
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(HERE, "Cargo.toml")])


def peer(command, args):
    out = sh(command + [str(a) for a in args], capture_output=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def stampede(binary, horizon, replicas):
    with tempfile.TemporaryDirectory() as out:
        sets = [f"queue.arrival_rate_per_s={LAMBDA}", f"queue.service_rate_per_s={MU}",
                f"run.horizon_s={horizon}", f"run.warmup_s={WARMUP}"]
        command = [binary, "run", "mmc", "--grid", f"queue.servers={SERVERS}", "--replicas", str(replicas),
                   "--threads", "1", "--seed", "1", "--json", "--quiet", "--no-report", "--out", out]
        for s in sets:
            command += ["--set", s]
        answer = json.loads(sh(command, capture_output=True).stdout)
        with open(os.path.join(out, "mmc", "manifest.json")) as f:
            throughput = json.load(f)["host"]["throughput"][0]
    metrics = answer["grid"][0]["metrics"]
    events = metrics["events"]["mean"] * replicas
    return {"peer": "stampede", "events": events, "seconds": events / throughput["events_per_s"],
            "mean_wait_s": metrics["wait_mean_s"]["mean"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stampede", help="a stampede binary to measure (default: this checkout's, "
                                            "built in release first so it is never stale)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the horizon (a smoke run)")
    parser.add_argument("--no-install", action="store_true", help="use what is installed and built already")
    args = parser.parse_args()
    if args.stampede is None:
        # Always through cargo: an existing target/release/stampede may predate the
        # checkout's code (it did once, and measured yesterday's kernel).
        sh(["cargo", "build", "--release", "--quiet", "--bin", "stampede"], cwd=ROOT)
        args.stampede = os.path.join(ROOT, "target", "release", "stampede")
    if not args.no_install:
        install()
    horizon = 100.0 + WARMUP if args.quick else 1000.0 + WARMUP
    bins = os.path.join(HERE, "target", "release")
    # Replicas per peer: enough for a mean wait within a few percent, few for the slow ones.
    runs = [
        (lambda r: stampede(args.stampede, horizon, r), 20),
        (lambda r: peer([os.path.join(bins, "minimal")], [LAMBDA, MU, SERVERS, horizon, WARMUP, r, 1]), 20),
        (lambda r: peer([os.path.join(bins, "nexosim_mmc")], [LAMBDA, MU, SERVERS, horizon, WARMUP, r, 1]), 10),
        (lambda r: peer([sys.executable, os.path.join(HERE, "simpy_mmc.py")], [LAMBDA, MU, SERVERS, horizon, WARMUP, r, 1]), 4),
        (lambda r: peer([sys.executable, os.path.join(HERE, "ciw_mmc.py")], [LAMBDA, MU, SERVERS, horizon, WARMUP, r, 1]), 2),
    ]
    theory = erlang_c_wait(SERVERS, LAMBDA, MU)
    results = []
    for run, replicas in runs:
        result = run(replicas)
        result["replicas"] = replicas
        result["rate"] = result["events"] / result["seconds"]
        # Replica means at ρ = 0.8 vary by about 3% per 1,000 s: allow 4 standard errors.
        result["tolerance"] = 4 * 0.03 * math.sqrt(1000.0 / (horizon - WARMUP)) / math.sqrt(replicas)
        result["agrees"] = abs(result["mean_wait_s"] / theory - 1) <= result["tolerance"]
        results.append(result)
        print(f"peers: {result['peer']}: {result['rate'] / 1e6:.3f} M events/s", file=sys.stderr)
    base = results[0]["rate"]
    print(f"M/M/c: λ = {LAMBDA:g}/s, μ = {MU:g}/s, c = {SERVERS}, {horizon - WARMUP:g} s after a {WARMUP:g} s warm-up; "
          f"Erlang C's mean wait {theory * 1e3:.3f} ms")
    print(f"{'peer':<22} {'replicas':>8} {'events':>12} {'seconds':>9} {'events/s (1 core)':>18} "
          f"{'stampede is':>12}  {'mean wait':>10}  Erlang C")
    for r in results:
        ratio = "—" if r is results[0] else f"{base / r['rate']:.2f}×"
        verdict = "agrees" if r["agrees"] else f"DISAGREES (±{r['tolerance'] * 100:.0f}%)"
        print(f"{r['peer']:<22} {r['replicas']:>8} {r['events']:>12.0f} {r['seconds']:>9.3f} "
              f"{r['rate'] / 1e6:>16.3f} M {ratio:>12}  {r['mean_wait_s'] * 1e3:>8.3f} ms  {verdict}")
    return 0 if all(r["agrees"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
