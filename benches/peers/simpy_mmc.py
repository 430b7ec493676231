"""The same M/M/c in SimPy: a Resource with c servers, a process per customer.

Usage: python3 simpy_mmc.py LAMBDA MU SERVERS HORIZON_S WARMUP_S REPLICAS SEED
Prints one JSON line: events handled (arrivals + service completions), wall seconds,
mean wait in queue of the customers who arrived after the warm-up and started service.
"""
import json
import random
import sys
import time

import simpy


def replica(lam, mu, servers, horizon, warmup, seed):
    rng = random.Random(seed)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=servers)
    totals = {"events": 0, "waits": 0, "waited": 0.0}

    def customer(env):
        arrived = env.now
        with server.request() as request:
            yield request
            if arrived >= warmup:
                totals["waits"] += 1
                totals["waited"] += env.now - arrived
            yield env.timeout(rng.expovariate(mu))
            totals["events"] += 1  # the service completion

    def source(env):
        while True:
            yield env.timeout(rng.expovariate(lam))
            totals["events"] += 1  # the arrival
            env.process(customer(env))

    env.process(source(env))
    env.run(until=horizon)
    return totals


def main():
    lam, mu, servers, horizon, warmup, replicas, seed = sys.argv[1:8]
    started = time.perf_counter()
    events = waits = 0
    waited = 0.0
    for r in range(int(replicas)):
        t = replica(float(lam), float(mu), int(servers), float(horizon), float(warmup), int(seed) * 1000003 + r)
        events += t["events"]
        waits += t["waits"]
        waited += t["waited"]
    seconds = time.perf_counter() - started
    print(json.dumps({"peer": f"SimPy {simpy.__version__}", "events": events, "seconds": seconds,
                      "mean_wait_s": waited / waits}))


if __name__ == "__main__":
    main()
