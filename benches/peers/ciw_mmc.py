"""The same M/M/c in Ciw (a queueing-network library): one node, c servers.

Usage: python3 ciw_mmc.py LAMBDA MU SERVERS HORIZON_S WARMUP_S REPLICAS SEED
Prints one JSON line like simpy_mmc.py: events are arrivals + service completions
(Ciw's records of customers who finished, plus every arrival).
"""
import json
import sys
import time

import ciw


def main():
    lam, mu, servers, horizon, warmup, replicas, seed = sys.argv[1:8]
    lam, mu, servers, horizon, warmup = float(lam), float(mu), int(servers), float(horizon), float(warmup)
    started = time.perf_counter()
    events = waits = 0
    waited = 0.0
    for r in range(int(replicas)):
        network = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=lam)],
            service_distributions=[ciw.dists.Exponential(rate=mu)],
            number_of_servers=[servers],
        )
        ciw.seed(int(seed) * 1000003 + r)
        simulation = ciw.Simulation(network)
        simulation.simulate_until_max_time(horizon)
        records = simulation.get_all_records()
        arrivals = simulation.nodes[0].number_of_individuals  # arrivals generated
        events += len(records) + arrivals
        for record in records:
            if record.arrival_date >= warmup:
                waits += 1
                waited += record.waiting_time
    seconds = time.perf_counter() - started
    print(json.dumps({"peer": f"Ciw {ciw.__version__}", "events": events, "seconds": seconds,
                      "mean_wait_s": waited / waits}))


if __name__ == "__main__":
    main()
